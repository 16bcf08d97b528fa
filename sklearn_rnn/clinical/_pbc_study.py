"""The lupus study of the thesis (section 4.3) redone on the public PBC visit histories.

One implementation shared by ``python -m sklearn_rnn`` and
``examples/plot_clinical_pbcseq.py``: cohorts over the grid of Table 4.4 (``upper_span``
x ``lower_span`` x ``min_visits``, in years and visits), each scored by the pooled
8-fold cross-validated ROC AUC of logistic regressions on the first visit, the last visit
and a summary of the history, and of the RNN without and with the time between visits;
then a nested grid search over ``spectral_radius`` and ``clip_threshold`` for the best
setting, whose pooled probabilities give the ROC, sensitivity-specificity and
precision-recall curves. Every model is a public estimator in a pipeline.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import product
from numbers import Integral, Real
from typing import Any

import numpy as np
import pandas as pd
from sklearn.base import clone
from sklearn.impute import SimpleImputer
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GridSearchCV, ParameterGrid, StratifiedKFold
from sklearn.pipeline import Pipeline, make_pipeline
from sklearn.preprocessing import FunctionTransformer, StandardScaler

from .._estimators import RNNClassifier
from .._stacked import check_stackable
from ..datasets import load_pbcseq
from ..model_selection import RNNGridSearchCV
from ..sequences import SequenceStandardScaler, check_sequences
from ._cohort import Cohort, build_cohort
from ._evaluation import (
    PooledCVResult,
    _check_n_jobs,
    _check_threshold,
    auc_intervals,
    pooled_cross_validate,
)
from ._features import VisitFeatures

__all__ = ["PBCStudy", "StudyResult", "load_pbc_cohort", "study_models"]

#: Days per year: the PBC table counts days, the protocol's spans are in years.
YEAR = 365.25
#: Visit measurements used as features (``age`` is the age at registration).
FEATURES: tuple[str, ...] = (
    "age", "bili", "albumin", "protime", "ast", "platelet", "edema", "ascites", "hepato",
    "spiders",
)
#: Right-skewed laboratory values, used on a log scale.
LOG_FEATURES: tuple[str, ...] = ("bili", "protime", "ast", "platelet")
#: The grid of the thesis' Table 4.4: upper span and lower span in years, min visits.
FULL_GRID: tuple[tuple[float, float, int], ...] = tuple(
    (upper, lower, visits) for upper, lower, visits in product((1, 2), (1, 2), (2, 3, 4, 5))
)
#: Folds of the inner search tuning the summary regression's C.
INNER_SPLITS = 5
#: The cohort of the headline comparison: 208 patients, 86 deaths.
MAIN_SETTING: tuple[float, float, int] = (1, 1, 2)
#: The thesis the study follows (its section 4.3), as cited in the study's output.
THESIS = (
    "Giulio Galvan, On recurrent neural networks, Tesi di Laurea (master's thesis) in "
    "Ingegneria Informatica, Scuola di Ingegneria, Università degli Studi di Firenze, "
    "academic year 2014/2015"
)
#: Model names, in table order.
MODELS: tuple[str, ...] = (
    "LR first", "LR last", "LR summary", "LR summary, C tuned", "RNN no time",
    "RNN visit order", "RNN time gaps",
)


def load_pbc_cohort(
    upper_span: float = 1.0,
    lower_span: float = 1.0,
    min_visits: int = 2,
    *,
    features: str | Sequence[str] = FEATURES,
    log_features: str | Sequence[str] = LOG_FEATURES,
) -> Cohort:
    """Death cohort of the PBC visit histories, selected by the thesis' protocol.

    Patients who had a liver transplant are left out (their outcome is not death);
    death is the event (``event_time`` = follow-up end of the patients who died),
    negatives are walked back from the end of follow-up, and positives are cut
    ``upper_span`` before death like negatives (a prediction at least that far ahead).
    See :func:`~sklearn_rnn.clinical.build_cohort`.

    Parameters
    ----------
    upper_span : float, default=1.0
        Prediction horizon, in years.
    lower_span : float, default=1.0
        Minimum time covered by the kept visits, in years.
    min_visits : int, default=2
        Minimum number of kept visits.
    features : str or sequence of str, default=FEATURES
        Numeric columns of :func:`~sklearn_rnn.datasets.load_pbcseq` used as features
        (``sex``, its one text column, is refused with the code of this cohort with
        ``sex`` as a 0/1 column, built by :func:`~sklearn_rnn.clinical.build_cohort`).
    log_features : str or sequence of str, default=LOG_FEATURES
        Features replaced by their natural logarithm (right-skewed labs), each named
        in ``features``, numeric and positive wherever it is observed (the default
        applies to those of ``LOG_FEATURES`` that ``features`` names).

    Returns
    -------
    Cohort
        Sequences with the visit day (days since registration) in column 0
        (``time_feature=0``), then ``features``.

    Examples
    --------
    >>> from sklearn_rnn.clinical import load_pbc_cohort
    >>> cohort = load_pbc_cohort(1, 1, 2)
    >>> len(cohort.y), int(cohort.y.sum()), cohort.feature_names[:3]
    (208, 86, ['day', 'age', 'bili'])
    """
    for name, value in (("upper_span", upper_span), ("lower_span", lower_span)):
        if isinstance(value, bool) or not isinstance(value, Real) or not np.isfinite(value) or value < 0:
            raise ValueError(f"{name} must be a finite number >= 0 of years; got {value!r}.")
    features = _column_names(features, "features", "('bili', 'albumin')")
    # In its own terms (build_cohort's checks name its feature_columns, which was not given).
    kept_apart = [name for name in features if name in ("id", "day")]
    if kept_apart:
        raise ValueError(
            f"features must not name {kept_apart}: 'id' names the patients and 'day' is each "
            "visit's time, put first in every sequence. Leave them out of features."
        )
    if len(set(features)) != len(features):
        raise ValueError(f"features has repeated names: {features}. List each once.")
    if log_features is LOG_FEATURES:  # the default: those of the features it names
        log_features = [name for name in LOG_FEATURES if name in features]
    log_features = _column_names(log_features, "log_features", "('bili',), () for none")
    log_features = list(dict.fromkeys(log_features))  # each logged once
    not_features = [name for name in log_features if name not in features]
    if not_features:
        addable = [name for name in not_features if name not in ("id", "day", "futime", "status")]
        raise ValueError(
            f"log_features names {not_features}, which are not among features={features}: only "
            "features are put on a log scale (the id, day and outcome columns stay as they "
            "are). Leave them out of log_features"
            + (f", or add {addable} to features." if addable else ".")
        )
    outcome = [name for name in ("futime", "status") if name in features]
    if outcome:
        raise ValueError(
            f"features names {outcome}, the columns the outcome is built from (the end of "
            "follow-up and how it ended): a model reading them would see the answer. "
            "Leave them out."
        )
    table = load_pbcseq()
    transplanted = table.loc[table["status"] == 1, "id"].unique()
    table = table[~table["id"].isin(transplanted)].copy()
    unknown = [name for name in [*features, *log_features] if name not in table.columns]
    if unknown:
        raise ValueError(
            f"{unknown} are not columns of load_pbcseq(): expected some of {list(table.columns)}."
        )
    for name in log_features:
        if not pd.api.types.is_numeric_dtype(table[name]) or pd.api.types.is_bool_dtype(table[name]):
            raise ValueError(
                f"log_features names {name!r}, whose values are not numbers ({table[name].dtype}): "
                "only numeric features have a logarithm. Leave it out of log_features."
            )
        if (table[name] <= 0).any():
            raise ValueError(
                f"log_features names {name!r}, which has {int((table[name] <= 0).sum())} values "
                f"of 0 or below (min {table[name].min():g}): their logarithm is not finite. "
                "Leave it out of log_features."
            )
        table[name] = np.log(table[name])
    text = [name for name in features if not pd.api.types.is_numeric_dtype(table[name])]
    if text:  # build_cohort's advice (encode `table`, feature_columns=) is not for this caller
        raise ValueError(
            f"features names {text}, which hold text categories ({table[text[0]].dtype}): "
            f"load_pbc_cohort reads numeric columns only. Leave {'them' if len(text) > 1 else 'it'} "
            "out of features, or build the cohort with build_cohort on load_pbcseq() with sex "
            "as a number (1 for male), as load_pbc_cohort would:\n"
            + _encoded_sex_code(features, log_features, upper_span, lower_span, min_visits)
        )
    per_patient = table.groupby("id")[["futime", "status"]].first()
    return build_cohort(
        table,
        id_column="id",
        time_column="day",
        feature_columns=list(features),
        event_time=per_patient.loc[per_patient["status"] == 2, "futime"],
        end_time=per_patient["futime"],
        upper_span=upper_span * YEAR,
        lower_span=lower_span * YEAR,
        min_visits=min_visits,
        positive_cut="upper_span",
    )


def _column_names(value: Any, name: str, example: str) -> list[Any]:
    """``value``, one column name or a sequence of them, as a list; refused, naming
    ``name``, when it is neither (None: Python's bare "not iterable")."""
    if isinstance(value, str):
        return [value]
    try:
        return list(value)
    except TypeError as error:
        raise TypeError(
            f"{name} must be a column name of load_pbcseq() or a sequence of them, e.g. "
            f"{example}; got {value!r}."
        ) from error


def _encoded_sex_code(
    features: list[str], log_features: list[str], upper_span: float, lower_span: float, min_visits: int
) -> str:
    """The code of :func:`load_pbc_cohort`'s cohort with ``sex`` as a 0/1 ``male`` column."""
    columns = ["male" if name == "sex" else name for name in features]
    encode = ", ".join(
        ["male=lambda t: (t['sex'] == 'm').astype(float)"]
        + [f"{name}=lambda t: np.log(t[{name!r}])" for name in log_features]
    )
    return (
        "    import numpy as np\n"
        "    from sklearn_rnn.clinical import build_cohort\n"
        "    from sklearn_rnn.datasets import load_pbcseq\n"
        f"    pbc = load_pbcseq().query('status != 1').assign({encode})\n"
        "    per_patient = pbc.groupby('id')[['futime', 'status']].first()\n"
        "    cohort = build_cohort(\n"
        f"        pbc, id_column='id', time_column='day', feature_columns={columns!r},\n"
        "        event_time=per_patient.query('status == 2')['futime'], end_time=per_patient['futime'],\n"
        f"        upper_span={upper_span * YEAR!r}, lower_span={lower_span * YEAR!r}, "
        f"min_visits={min_visits!r}, positive_cut='upper_span')"
    )


def _drop_time(sequences: Any) -> list[np.ndarray]:
    """The sequences without their time column (column 0)."""
    return [np.asarray(sequence)[:, 1:] for sequence in sequences]


def _visit_numbers(sequences: Any) -> list[np.ndarray]:
    """The sequences with the visit number 0, 1, 2, ... in place of the time column,
    read as the estimators read them: the trailing all-NaN steps of a padded array are
    padding, not visits, and stay out."""
    numbered = []
    for sequence in check_sequences(sequences):
        sequence = np.array(sequence, dtype=np.float64)
        sequence[:, 0] = np.arange(len(sequence))
        numbered.append(sequence)
    return numbered


def study_models(random_state: int | None = 0, **rnn_params: Any) -> dict[str, Pipeline]:
    """The models of the study, each a pipeline reading sequences with time in column 0.

    Logistic regressions (imputed, standardized) on the first visit, the last visit and
    a summary of the history (:class:`VisitFeatures`), at scikit-learn's defaults and,
    for the summary, with ``C`` tuned by an inner 5-fold search; and the RNN classifier
    at its defaults after a :class:`~sklearn_rnn.SequenceStandardScaler`: without the
    time column ('RNN no time': the 'gru' cell of 'auto'), with the visit number as its time
    ('RNN visit order': the time-aware cell, but every gap is one visit), and with the
    real visit days as ``time_feature=0`` ('RNN time gaps').

    Parameters
    ----------
    random_state : int or None, default=0
        Seed of the RNNs and of the inner folds that tune the summary regression's C.
    **rnn_params
        Other parameters of the three RNN classifiers (none: their defaults).

    Returns
    -------
    dict of str to Pipeline
        Keyed by the names in ``MODELS``.

    Examples
    --------
    >>> from sklearn_rnn.clinical import study_models
    >>> models = study_models()
    >>> list(models)  # doctest: +NORMALIZE_WHITESPACE
    ['LR first', 'LR last', 'LR summary', 'LR summary, C tuned', 'RNN no time',
     'RNN visit order', 'RNN time gaps']
    >>> models["RNN time gaps"][-1]
    RNNClassifier(random_state=0, time_feature=0)
    """

    def logistic(kind: str, model: Any = None) -> Pipeline:
        return make_pipeline(
            VisitFeatures(kind, time_feature=0),
            SimpleImputer(),
            StandardScaler(),
            LogisticRegression(max_iter=1000) if model is None else model,
        )

    if "time_feature" in rnn_params:  # Python's "got multiple values for keyword argument"
        raise ValueError(
            f"study_models sets each RNN's time_feature itself (none, the visit order, the "
            f"visit times); got time_feature={rnn_params['time_feature']!r} in rnn_params. Leave it out."
        )

    def rnn(*steps: Any, time_feature: int | None = 0) -> Pipeline:
        classifier = RNNClassifier(
            time_feature=time_feature, random_state=random_state, **rnn_params
        )
        return make_pipeline(*steps, SequenceStandardScaler(), classifier)

    tuned = GridSearchCV(
        LogisticRegression(max_iter=1000),
        {"C": np.logspace(-3, 1, 9)},
        scoring="roc_auc",
        cv=StratifiedKFold(INNER_SPLITS, shuffle=True, random_state=random_state),  # the study's seed too
    )
    return {
        "LR first": logistic("first"),
        "LR last": logistic("last"),
        "LR summary": logistic("summary"),
        "LR summary, C tuned": logistic("summary", tuned),
        "RNN no time": rnn(FunctionTransformer(_drop_time), time_feature=None),
        "RNN visit order": rnn(FunctionTransformer(_visit_numbers)),
        "RNN time gaps": rnn(),
    }


@dataclass
class PBCStudy:
    """Settings of the PBC study: which cohorts, how many shuffles, the nested search.

    The study has three parts. (1) The headline cohort ``main_setting`` (1 year, 1
    year, 2 visits: 208 patients, 86 deaths), every model scored over ``n_repeats``
    shuffles of the 8-fold split. (2) The grid of the thesis' Table 4.4, every model
    on every cohort of ``grid`` over ``grid_repeats`` shuffles (empty in the quick
    setting). (3) A nested grid search of the RNN with time gaps over ``search_grid``
    on the setting where it scored best (the headline cohort when there is no grid):
    its pooled probabilities give the plots. The inner search is a
    :class:`~sklearn_rnn.RNNGridSearchCV`, which trains all of its networks together
    (the same scores as :class:`~sklearn.model_selection.GridSearchCV`).

    Attributes
    ----------
    main_setting : (float, float, int), default=(1, 1, 2)
        ``(upper_span, lower_span, min_visits)`` of the headline cohort, spans in years.
    n_repeats : int, default=3
        Shuffles of the 8-fold split on the headline cohort; the mean pooled AUC over
        them is reported.
    grid : sequence of (float, float, int), default=FULL_GRID
        Cohorts of the grid table (an iterator, such as ``itertools.product(...)``, is
        read once, when the study is made, and kept as a tuple for every run).
    grid_repeats : int, default=1
        Shuffles per cohort of the grid.
    n_splits : int, default=8
        Folds. Every cohort must have at least ``n_splits`` patients in its smaller
        class, and every outer training fold at least 5 of each class for the inner
        5-fold search of 'LR summary, C tuned'; :meth:`run` refuses other cohorts
        before fitting, giving the usable range.
    search_grid : dict, default={'spectral_radius': [0.9, 1.2], 'clip_threshold': [1.0, 5.0]}
        Parameters of the RNN with time gaps searched in the nested search (inner
        3-fold stratified cross-validation scored by ROC AUC).
    threshold : float, default=0.5
        Probability threshold of precision, recall and specificity.
    random_state : int or None, default=0
        Seeds the folds and the RNNs.
    n_jobs : int or None, default=None
        Folds fitted in parallel.
    rnn_params : dict, default={}
        Parameters of the RNN classifiers other than their defaults (the study itself
        uses none), except ``random_state`` (see above) and ``time_feature`` (which each
        study model sets).

    Examples
    --------
    >>> from sklearn_rnn.clinical import PBCStudy
    >>> PBCStudy.quick().grid
    ()
    >>> len(PBCStudy().grid)
    16
    """

    main_setting: tuple[float, float, int] = MAIN_SETTING
    n_repeats: int = 3
    grid: Sequence[tuple[float, float, int]] = FULL_GRID
    grid_repeats: int = 1
    n_splits: int = 8
    search_grid: dict[str, list[Any]] = field(
        default_factory=lambda: {"spectral_radius": [0.9, 1.2], "clip_threshold": [1.0, 5.0]}
    )
    threshold: float = 0.5
    random_state: int | None = 0
    n_jobs: int | None = None
    rnn_params: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._keep_grid()

    def _keep_grid(self) -> None:
        """Read a ``grid`` given as an iterator once, and keep it as a tuple: a second run
        of the study read it used up, silently (no grid: another best setting and nested
        search), whether it was given to the constructor or set afterwards."""
        if isinstance(self.grid, Iterator):
            self.grid = tuple(self.grid)

    @classmethod
    def quick(cls, **changes: Any) -> PBCStudy:
        """The headline cohort and the nested search, no grid: 40 s to 2 minutes on 2 cores.

        Parameters
        ----------
        **changes
            Other settings.

        Returns
        -------
        PBCStudy
        """
        return cls(**{"grid": (), **changes})

    def run(
        self,
        on_row: Callable[[str, dict[str, Any]], None] | None = None,
        on_fold: Callable[[int, int], None] | None = None,
        on_model: Callable[[str, str], None] | None = None,
    ) -> StudyResult:
        """Score every model on the headline cohort and the grid, then run the nested search.

        Parameters
        ----------
        on_row : callable, optional
            Called as ``on_row(part, row)`` with ``part`` 'main' or 'grid' and each
            finished row of a table (a dict), e.g. to show progress.
        on_fold : callable, optional
            Called as ``on_fold(done, total)`` after each outer fold of the nested
            search.
        on_model : callable, optional
            Called as ``on_model(part, name)`` after each model of each cohort.

        Returns
        -------
        StudyResult

        Raises
        ------
        ValueError or TypeError
            Naming the setting, when one is invalid: every setting is checked (and every
            cohort loaded) before any model is fitted.
        """
        start = time.perf_counter()
        models, main_cohort, grid_settings, grid_cohorts = self._check_settings()
        scores: list[dict[str, Any]] = []
        main_results: dict[str, PooledCVResult] = {}
        main = self._table(
            [self.main_setting], [main_cohort], self.n_repeats, models, scores, "main", on_row,
            main_results, on_model,
        )
        grid = self._table(
            grid_settings, grid_cohorts, self.grid_repeats, models, scores, "grid", on_row,
            None, on_model,
        )
        ranked = grid if len(grid) else main
        best = ranked.loc[ranked["RNN time gaps"].idxmax()]
        best_setting = (
            float(best["upper_span"]), float(best["lower_span"]), int(best["min_visits"])
        )
        nested = self._nested_search(
            load_pbc_cohort(*best_setting), models["RNN time gaps"], on_fold
        )
        baselines = [name for name in main_results if name.startswith("LR")]
        best_baseline = max(baselines, key=lambda name: main_results[name].mean_pooled_auc)
        seed = self.random_state
        intervals = auc_intervals(main_results, reference=best_baseline, random_state=seed)
        gaps = auc_intervals(
            {name: main_results[name] for name in ("RNN visit order", "RNN time gaps")},
            reference="RNN visit order",
            random_state=seed,
        ).loc["RNN time gaps", ["diff", "diff_low", "diff_high"]]
        return StudyResult(
            main=main,
            intervals=intervals,
            best_baseline=best_baseline,
            time_gaps_over_visit_order=tuple(float(value) for value in gaps),
            main_results=main_results,
            grid=grid,
            scores=pd.DataFrame(scores),
            best_setting=best_setting,
            nested=nested,
            seconds=time.perf_counter() - start,
        )

    def _check_settings(
        self,
    ) -> tuple[dict[str, Pipeline], Cohort, list[tuple[float, float, int]], list[Cohort]]:
        """Refuse invalid settings, naming them, before any model is fitted (an error
        in the grid or the nested search came after minutes of work); return the models,
        the cohort of ``main_setting``, and the settings of ``grid`` (read once: an
        iterator is used up) with their cohorts."""
        for name in ("n_repeats", "grid_repeats", "n_splits"):
            value, low = getattr(self, name), 2 if name == "n_splits" else 1
            if isinstance(value, bool) or not isinstance(value, Integral) or value < low:
                raise ValueError(f"PBCStudy.{name} must be an int >= {low}; got {value!r}.")
        _check_threshold(self.threshold, "PBCStudy.threshold")
        _check_n_jobs(self.n_jobs, "PBCStudy.n_jobs")
        seed = self.random_state
        if seed is not None and (
            isinstance(seed, bool) or not isinstance(seed, Integral) or not 0 <= seed <= 2**32 - 1
        ):  # it seeds the folds and the RNNs: rnn_params was blamed for it
            raise ValueError(
                f"PBCStudy.random_state must be an int in [0, {2**32 - 1}] or None; got {seed!r}."
            )
        self._keep_grid()
        try:
            grid = list(self.grid)
        except TypeError as error:
            raise TypeError(
                "PBCStudy.grid must be a sequence of (upper_span, lower_span, min_visits), e.g. "
                f"((1, 1, 2), (2, 1, 2)) or () for none; got {self.grid!r}."
            ) from error
        cohorts = []
        settings = [("main_setting", self.main_setting)]
        settings += [(f"grid[{i}]", setting) for i, setting in enumerate(grid)]
        for label, setting in settings:
            try:
                if isinstance(setting, str) or len(setting) != 3:
                    raise ValueError(f"expected 3 values; got {setting!r}")
                cohort = load_pbc_cohort(*setting)
            except (TypeError, ValueError) as error:
                raise ValueError(
                    f"PBCStudy.{label}={setting!r} must be (upper_span, lower_span, min_visits), "
                    f"spans in years, e.g. (1, 1, 2): {error}"
                ) from error
            smallest = min(cohort.summary["positives"], cohort.summary["negatives"])
            problem = _fold_problem(smallest, self.n_splits)
            if problem:
                raise ValueError(
                    f"PBCStudy.n_splits={self.n_splits} does not suit the cohort "
                    f"PBCStudy.{label}={setting!r}, whose smaller class has {smallest} patients: "
                    f"{problem}"
                )
            cohorts.append(cohort)
        fixed = [name for name in ("random_state", "time_feature")
                 if isinstance(self.rnn_params, Mapping) and name in self.rnn_params]
        if fixed:
            raise ValueError(
                "PBCStudy.rnn_params may not set random_state (use PBCStudy.random_state) or "
                f"time_feature (each study model sets its own); got {fixed}."
            )
        try:
            models = study_models(self.random_state, **self.rnn_params)
            for model in models.values():
                rnn = model[-1]
                if isinstance(rnn, RNNClassifier):
                    rnn._validate_params()  # an invalid value, as fit refuses it
                    rnn._check_optimizer_cell()
        except (TypeError, ValueError) as error:
            raise (ValueError if isinstance(error, ValueError) else TypeError)(
                f"PBCStudy.rnn_params={self.rnn_params!r} must be parameters of RNNClassifier "
                f"and their values: {error}"
            ) from error
        rnn = models["RNN time gaps"]
        step = rnn.steps[-1][0]
        try:
            if not isinstance(self.search_grid, Mapping):
                raise TypeError(f"got a {type(self.search_grid).__name__}")
            for params in ParameterGrid(self.search_grid):  # every setting of the nested search
                candidate = clone(rnn).set_params(**{f"{step}__{k}": v for k, v in params.items()})
                candidate[-1]._validate_params()
                candidate[-1]._check_optimizer_cell()
                check_stackable(candidate[-1])  # RNNGridSearchCV trains them together
        except (TypeError, ValueError) as error:
            on = " (on the RNN with PBCStudy.rnn_params)" if self.rnn_params else ""
            raise (ValueError if isinstance(error, ValueError) else TypeError)(
                f"PBCStudy.search_grid={self.search_grid!r} must map parameters of RNNClassifier "
                f"to lists of values the nested search can train together{on}: {error}"
            ) from error
        return models, cohorts[0], grid, cohorts[1:]

    def _table(
        self,
        settings: Sequence[tuple[float, float, int]],
        cohorts: Sequence[Cohort],
        n_repeats: int,
        models: dict[str, Any],
        scores: list[dict[str, Any]],
        part: str,
        on_row: Callable[[str, dict[str, Any]], None] | None,
        results: dict[str, PooledCVResult] | None = None,
        on_model: Callable[[str, str], None] | None = None,
    ) -> pd.DataFrame:
        rows = []
        for setting, cohort in zip(settings, cohorts, strict=True):
            row: dict[str, Any] = dict(zip(SETTING_COLUMNS, setting, strict=True))
            row.update(positives=cohort.summary["positives"], negatives=cohort.summary["negatives"])
            for name, model in models.items():
                result = self._evaluate(model, cohort, n_repeats)
                row[name] = result.mean_pooled_auc
                if results is not None:
                    results[name] = result
                if on_model is not None:
                    on_model(part, name)
                scores.append({"part": part, **dict(zip(SETTING_COLUMNS, setting, strict=True)),
                               "model": name, **result.summary(), "seconds": result.fit_seconds})
            rows.append(row)
            if on_row is not None:
                on_row(part, row)
        columns = [*SETTING_COLUMNS, "positives", "negatives", *models]
        return pd.DataFrame(rows, columns=columns)

    def _evaluate(
        self, model: Any, cohort: Cohort, n_repeats: int, on_fold: Any = None
    ) -> PooledCVResult:
        return pooled_cross_validate(
            model,
            cohort.sequences,
            cohort.y,
            n_splits=self.n_splits,
            n_repeats=n_repeats,
            threshold=self.threshold,
            random_state=self.random_state,
            n_jobs=self.n_jobs,
            on_fold=on_fold,
        )

    def _nested_search(self, cohort: Cohort, rnn: Pipeline, on_fold: Any = None) -> PooledCVResult:
        step = rnn.steps[-1][0]
        # Every (setting, fold) network of the inner search trained together: the same
        # scores as GridSearchCV, several times faster (see :ref:`stacked_search`).
        search = RNNGridSearchCV(
            rnn,
            {f"{step}__{name}": values for name, values in self.search_grid.items()},
            scoring="roc_auc",
            cv=StratifiedKFold(3, shuffle=True, random_state=self.random_state),
        )
        return self._evaluate(search, cohort, 1, on_fold)


def _fold_problem(smallest: int, n_splits: int) -> str:
    """What is wrong with ``n_splits`` outer folds of a cohort whose smaller class has
    ``smallest`` patients, with the fix, or '' when nothing is: every stratified fold
    needs both classes, and every outer training fold needs ``INNER_SPLITS`` of each
    class for the inner search tuning the summary regression's C (the nested search's
    3 folds need fewer)."""

    def kept(n: int) -> int:  # the fewest of the smaller class an outer training fold keeps
        return smallest - -(-smallest // n)  # stratified test folds take at most ceil(smallest / n)

    usable = [n for n in range(2, smallest + 1) if kept(n) >= INNER_SPLITS]
    fix = (
        f"Choose n_splits from {usable[0]} to {smallest}, or leave that cohort out."
        if usable
        else f"Each class needs at least {INNER_SPLITS + 1} patients: leave that cohort out."
    )
    if smallest < n_splits:
        return f"every stratified fold needs both classes, so at most {smallest} folds. {fix}"
    if kept(n_splits) < INNER_SPLITS:
        return (
            f"an outer training fold would keep only {kept(n_splits)} of them, and the inner "
            f"{INNER_SPLITS}-fold search tuning the summary regression's C needs "
            f"{INNER_SPLITS} (one per inner fold). {fix}"
        )
    return ""


#: Columns naming a cohort of the grid.
SETTING_COLUMNS: tuple[str, ...] = ("upper_span", "lower_span", "min_visits")


@dataclass(eq=False)
class StudyResult:
    """What :meth:`PBCStudy.run` found.

    Attributes
    ----------
    main : pandas.DataFrame
        The headline cohort: ``upper_span``, ``lower_span`` (years), ``min_visits``,
        ``positives``, ``negatives`` and the mean pooled AUC of every model over the
        repeats.
    intervals : pandas.DataFrame
        The headline cohort, one row per model (see
        :func:`~sklearn_rnn.clinical.auc_intervals`): the pooled AUC with its 95%
        bootstrap interval, and the paired difference to ``best_baseline`` with its
        interval.
    best_baseline : str
        The logistic regression with the highest pooled AUC on the headline cohort.
    time_gaps_over_visit_order : (float, float, float)
        What the visit days add over the visit numbers on the headline cohort: the
        pooled AUC of 'RNN time gaps' minus that of 'RNN visit order', with the 95%
        bootstrap interval of that paired difference.
    main_results : dict of str to PooledCVResult
        The headline cohort's out-of-fold probabilities of every model.
    grid : pandas.DataFrame
        The same columns, one row per cohort of the grid (empty without a grid).
    scores : pandas.DataFrame
        One row per part, cohort and model: pooled AUC (mean and standard deviation
        over the repeats), mean fold AUC, precision, recall and specificity at the
        threshold, and the seconds its cross-validation took.
    best_setting : tuple
        ``(upper_span, lower_span, min_visits)`` where the RNN with time gaps scored
        best.
    nested : PooledCVResult
        The nested grid search of the RNN with time gaps on the best setting: its
        pooled out-of-fold probabilities give the plots.
    seconds : float
        Wall-clock time of the whole study.

    Examples
    --------
    >>> from sklearn_rnn.clinical import StudyResult
    >>> StudyResult.__name__  # built by PBCStudy(...).run(), which takes minutes
    'StudyResult'
    """

    main: pd.DataFrame
    intervals: pd.DataFrame
    best_baseline: str
    time_gaps_over_visit_order: tuple[float, float, float]
    main_results: dict[str, PooledCVResult]
    grid: pd.DataFrame
    scores: pd.DataFrame
    best_setting: tuple[float, float, int]
    nested: PooledCVResult
    seconds: float

    def to_string(self, part: str = "main") -> str:
        """A table as text, AUCs to 3 decimals.

        Parameters
        ----------
        part : {'main', 'grid'}, default='main'
            Which table.

        Returns
        -------
        str
        """
        if part not in ("main", "grid"):
            raise ValueError(f"part must be 'main' or 'grid'; got {part!r}.")
        table = self.main if part == "main" else self.grid
        table = table.rename(columns={"upper_span": "upper", "lower_span": "lower",
                                      "min_visits": "visits", "positives": "pos",
                                      "negatives": "neg"})
        return table.to_string(index=False, float_format=lambda value: f"{value:.3f}")

    def interval_table(self) -> str:
        """The headline cohort's AUCs with their 95% intervals, as text.

        Returns
        -------
        str
            One line per model: pooled AUC [low, high], and the paired difference to
            the best logistic regression [low, high].
        """
        lines = [f"{'model':<22}{'pooled AUC [95% CI]':<24}difference to {self.best_baseline} [95% CI]"]
        for name, row in self.intervals.iterrows():
            auc = f"{row['auc']:.3f} [{row['auc_low']:.3f}, {row['auc_high']:.3f}]"
            if name == self.best_baseline:
                diff = "(the reference)"
            else:
                diff = f"{row['diff']:+.3f} [{row['diff_low']:+.3f}, {row['diff_high']:+.3f}]"
            lines.append(f"{name:<22}{auc:<24}{diff}")
        return "\n".join(lines)

    def plot(self, axes: Any = None) -> Any:
        """ROC, sensitivity-specificity and precision-recall curves of the nested search.

        Parameters
        ----------
        axes : sequence of 3 matplotlib.axes.Axes, optional
            Where to draw; a new figure when None.

        Returns
        -------
        ndarray of 3 matplotlib.axes.Axes
        """
        upper, lower, visits = self.best_setting
        axes = self.nested.plot(axes, name="RNN time gaps, nested search")
        axes[0].figure.suptitle(
            f"Upper span {upper:g} y, lower span {lower:g} y, min visits {visits}: "
            f"pooled AUC {self.nested.mean_pooled_auc:.3f}"
        )
        return axes
