"""Pooled cross-validated evaluation, visit features and the PBC study (issue 4)."""

from __future__ import annotations

import re
import warnings

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from sklearn.base import BaseEstimator, ClassifierMixin  # noqa: E402
from sklearn.exceptions import ConvergenceWarning  # noqa: E402
from sklearn.linear_model import LogisticRegression  # noqa: E402
from sklearn.model_selection import GridSearchCV  # noqa: E402
from sklearn.pipeline import make_pipeline  # noqa: E402
from sklearn.preprocessing import FunctionTransformer  # noqa: E402

from sklearn_rnn import RNNClassifier, RNNStepClassifier  # noqa: E402
from sklearn_rnn.clinical import (  # noqa: E402
    PBCStudy,
    PooledCVResult,
    VisitFeatures,
    load_pbc_cohort,
    pooled_cross_validate,
)


class ScoreIsColumnZero(ClassifierMixin, BaseEstimator):
    """A 'classifier' whose probability of class 1 is column 0 of X: out-of-fold
    probabilities are then known in advance. Counts its fits in a class attribute."""

    fits = 0

    def fit(self, X, y):
        self.classes_ = np.unique(y)
        type(self).fits += 1
        return self

    def predict_proba(self, X):
        score = np.asarray(X)[:, 0]
        return np.column_stack([1 - score, score])


#: 8 samples: 4 positives scored 0.9, 0.8, 0.4, 0.3; 4 negatives 0.7, 0.35, 0.2, 0.1.
SCORES = np.array([0.9, 0.8, 0.4, 0.3, 0.7, 0.35, 0.2, 0.1])
LABELS = np.array([1, 1, 1, 1, 0, 0, 0, 0])


def test_pooled_scores_against_a_hand_computation():
    ScoreIsColumnZero.fits = 0
    result = pooled_cross_validate(ScoreIsColumnZero(), SCORES[:, None], LABELS, n_splits=2,
                                   n_repeats=3, threshold=0.5, random_state=0)
    assert ScoreIsColumnZero.fits == 6  # a fresh clone per fold and repeat
    np.testing.assert_array_equal(result.y_score, np.tile(SCORES, (3, 1)))
    # Positive-negative pairs ranked right: 0.9 and 0.8 beat all 4 negatives, 0.4 beats
    # 3 (not 0.7), 0.3 beats 2 (not 0.7, 0.35): 13 of 16.
    np.testing.assert_allclose(result.pooled_auc, [13 / 16] * 3)
    # At 0.5: predicted positive 0.9, 0.8 (TP) and 0.7 (FP).
    np.testing.assert_allclose(result.precision, 2 / 3)
    np.testing.assert_allclose(result.recall, 2 / 4)
    np.testing.assert_allclose(result.specificity, 3 / 4)
    for repeat in range(3):  # every sample in exactly one test fold, classes stratified
        assert np.bincount(result.folds[repeat]).tolist() == [4, 4]
        assert np.bincount(result.folds[repeat][LABELS == 1]).tolist() == [2, 2]
    summary = result.summary()
    assert summary["pooled_auc"] == pytest.approx(13 / 16) and summary["pooled_auc_std"] == 0


def test_fold_auc_by_hand():
    folds = np.array([[0, 1, 0, 1, 0, 1, 0, 1]])
    result = PooledCVResult(LABELS, SCORES[None], folds, 0.5, 1, 0.0)
    # fold 0: positives 0.9, 0.4 vs negatives 0.7, 0.2 -> 3 of 4 pairs;
    # fold 1: positives 0.8, 0.3 vs negatives 0.35, 0.1 -> 3 of 4 pairs.
    np.testing.assert_allclose(result.fold_auc, [[0.75, 0.75]])
    assert result.mean_fold_auc == 0.75 and result.n_repeats == 1
    assert list(result.to_frame().columns) == [
        "pooled_auc", "mean_fold_auc", "precision", "recall", "specificity"
    ]


def test_labels_other_than_zero_and_one():
    labels = np.where(LABELS == 1, "dead", "alive")
    result = pooled_cross_validate(ScoreIsColumnZero(), SCORES[:, None], labels, n_splits=2,
                                   random_state=0)
    assert result.pos_label == "dead"
    np.testing.assert_allclose(result.pooled_auc, [13 / 16])
    # 'alive' is column 0, probability 1 - score: the mirror image ranks as well.
    flipped = pooled_cross_validate(ScoreIsColumnZero(), SCORES[:, None], labels,
                                    n_splits=2, pos_label="alive", random_state=0)
    np.testing.assert_allclose(flipped.y_score, 1 - SCORES[None])
    np.testing.assert_allclose(flipped.pooled_auc, [13 / 16])


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"y_true": np.where(LABELS == 1, 2, 1)}, r"y_true must hold 1 for the positive class and 0 "
         r"otherwise; got the values \[1, 2\]"),
        ({"y_true": np.ones(8, dtype=int)}, r"y_true must hold both classes.*got only \[1\]"),
        ({"y_true": LABELS[:, None]}, r"y_true must be 1D.*got shape \(8, 1\)"),
        ({"y_score": SCORES}, r"y_score must have shape \(n_repeats, n_samples\) = \(n_repeats, 8\).*"
         r"got shape \(8,\): pass y_score\[None\] for one repeat"),
        ({"y_score": SCORES[None, :7]}, r"y_score must have shape .*got shape \(1, 7\)"),
        ({"folds": np.array([0, 1] * 4)}, r"folds must have the shape of y_score, \(1, 8\).*got shape \(8,\)"),
        ({"folds": np.array([[0.0, 1] * 4])}, r"folds must hold the test fold numbers 0, 1, \.\.\. as ints"),
        ({"y_score": np.where(LABELS == 1, np.nan, SCORES)[None]},
         r"y_score holds 4 values that are not finite \(NaN or infinite\), e.g\. sample 0 of repeat 0"),
        # folds numbered from 1 or with a gap: scikit-learn's "Found array with 0 sample(s)"
        ({"folds": np.array([[1, 2] * 4])}, r"folds must number the test folds of each repeat 0, 1, "
         r"\.\.\., k-1 without gaps; repeat 0 has \[1, 2\]\. Renumber them, e\.g\. np\.unique"),
        ({"folds": np.array([[0, 1] * 4, [0, 2] * 4]), "y_score": np.stack([SCORES] * 2)},
         r"repeat 1 has \[0, 2\]"),
        ({"folds": np.array([[0] * 4 + [1] * 4])}, r"test fold 0 of repeat 0 holds only \[1\] of "
         r"y_true, and its AUC compares both classes"),
        # a threshold pooled_cross_validate refuses: 1.5 and NaN gave recall 0 as if valid
        ({"threshold": 1.5}, r"^PooledCVResult\.threshold must be a probability in \[0, 1\]; got 1\.5\.$"),
        ({"threshold": np.nan}, r"^PooledCVResult\.threshold must be a probability .*got nan\.$"),
        ({"threshold": "0.5"}, r"^PooledCVResult\.threshold must be a probability .*got '0\.5'\.$"),
    ],
)
def test_a_pooled_result_refuses_what_its_scores_cannot_be_computed_from(change, match):
    # Labels 1/2 scored AUC for class 2 but recall for class 1, and auc_intervals gave NaN
    # bounds; a 1D y_score got scikit-learn's "must be an array-like. Got np.float64(0.1)".
    given = {"y_true": LABELS, "y_score": SCORES[None], "folds": np.array([[0, 1] * 4]),
             "threshold": 0.5, "pos_label": 1, "fit_seconds": 0.0, **change}
    with pytest.raises(ValueError, match=match):
        PooledCVResult(**given)


class DivergesOnOneFold(ClassifierMixin, BaseEstimator):
    """Predicts NaN when fitted on an odd number of samples (one fold of 41 in 4)."""

    def fit(self, X, y):
        self.classes_ = np.unique(y)
        self.diverged_ = len(X) % 2 == 1
        return self

    def predict_proba(self, X):
        return np.full((len(X), 2), np.nan if self.diverged_ else 0.5)


def test_a_fold_predicting_probabilities_that_are_not_finite_is_named_when_it_ends():
    # All folds were fitted, then scikit-learn's bare "Input contains NaN." came.
    X, y = np.zeros((41, 2)), np.array([0, 1] * 20 + [1])
    done = []
    with pytest.raises(ValueError, match=r"the model of fold (\d) \(repeat 0\) predicted 10 "
                                         r"probabilities that are not finite") as refused:
        pooled_cross_validate(DivergesOnOneFold(), X, y, n_splits=4, random_state=0,
                              on_fold=lambda finished, total: done.append(finished))
    fold = re.search(r"fold (\d)", str(refused.value)).group(1)
    assert int(fold) == len(done)  # no fold fitted after it


def test_errors_say_what_to_fix():
    with pytest.raises(ValueError, match="exactly 2 classes"):
        pooled_cross_validate(ScoreIsColumnZero(), SCORES[:, None], np.arange(8) % 3)
    with pytest.raises(ValueError, match="fewer than n_splits=8.*at most 4"):
        pooled_cross_validate(ScoreIsColumnZero(), SCORES[:, None], LABELS)
    with pytest.raises(ValueError, match="threshold must be a probability"):
        pooled_cross_validate(ScoreIsColumnZero(), SCORES[:, None], LABELS, n_splits=2,
                              threshold=2)
    with pytest.raises(ValueError, match="X has 7 samples but y has 8"):
        pooled_cross_validate(ScoreIsColumnZero(), SCORES[:7, None], LABELS, n_splits=2)
    with pytest.raises(ValueError, match="pos_label=5 is not a class"):
        pooled_cross_validate(ScoreIsColumnZero(), SCORES[:, None], LABELS, n_splits=2,
                              pos_label=5)
    # Missing labels were counted as a third class ("got 3: [0.0, 1.0, nan]"), or failed
    # np.unique's sort (None among text labels).
    for missing in (LABELS.astype(float), np.where(LABELS == 1, "dead", "alive").astype(object)):
        missing[2] = None
        with pytest.raises(ValueError, match=r"^y has 1 missing label\(s\) \(NaN or None\), at positions \[2\]"):
            pooled_cross_validate(ScoreIsColumnZero(), SCORES[:, None], missing, n_splits=2)
    # pos_label as another type of the same class: the result named it 1.0, not the class 1
    assert pooled_cross_validate(ScoreIsColumnZero(), SCORES[:, None], LABELS, n_splits=2,
                                 pos_label=1.0).pos_label == 1
    # 0 got joblib's bare "n_jobs == 0 in Parallel has no meaning"; 1.5 ran unchecked.
    ScoreIsColumnZero.fits = 0
    for n_jobs in (0, 1.5, True, "2"):
        with pytest.raises(ValueError, match=r"^n_jobs must be None or a nonzero int \(-1: all "
                                             rf"cores\); got {n_jobs!r}\.$"):
            pooled_cross_validate(ScoreIsColumnZero(), SCORES[:, None], LABELS, n_splits=2,
                                  n_jobs=n_jobs)
    assert ScoreIsColumnZero.fits == 0  # refused before any fold was fitted


@pytest.mark.parametrize("wrap", [lambda m: m, lambda m: make_pipeline(FunctionTransformer(), m),
                                  lambda m: GridSearchCV(m, {"hidden_size": [2]})])
def test_an_estimator_that_predicts_at_every_step_is_refused_by_name(wrap):
    """A bare numpy error ('inhomogeneous shape') came from the per-step predictions."""
    rng = np.random.default_rng(0)
    X = [rng.normal(size=(4, 1)) for _ in range(8)]
    y = [(x > 0).astype(float) for x in X]
    with pytest.raises(TypeError, match="one probability per sequence; RNNStepClassifier predicts at every step"):
        pooled_cross_validate(wrap(RNNStepClassifier(max_iter=1)), X, y, n_splits=2)


def test_sequences_and_parallel_folds_give_the_same_result():
    rng = np.random.default_rng(0)
    X = [np.column_stack([np.cumsum(rng.uniform(1, 2, k)), rng.normal(size=(k, 1))])
         for k in rng.integers(2, 6, size=40)]
    y = np.array([int(x[-1, 1] > 0) for x in X])
    model = RNNClassifier(time_feature=0, hidden_size=4, max_iter=3, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        serial = pooled_cross_validate(model, X, y, n_splits=4, random_state=0)
        parallel = pooled_cross_validate(model, X, y, n_splits=4, random_state=0, n_jobs=2)
    np.testing.assert_allclose(serial.y_score, parallel.y_score, rtol=0, atol=1e-12)
    assert serial.fit_seconds > 0


class ProbeWarning(UserWarning):
    pass


class ConfigProbe(ClassifierMixin, BaseEstimator):
    """A 'classifier' whose probability of class 1 is 1.0 where scikit-learn's
    assume_finite was on in its fit, and that warns there with ``warn=True``."""

    def __init__(self, warn=False):
        self.warn = warn

    def fit(self, X, y):
        import sklearn

        if self.warn:
            warnings.warn("a fold's warning", ProbeWarning)
        self.classes_ = np.unique(y)
        self.flag_ = float(sklearn.get_config()["assume_finite"])
        return self

    def predict_proba(self, X):
        return np.column_stack([np.full(len(X), 1 - self.flag_), np.full(len(X), self.flag_)])


@pytest.mark.parametrize("backend", ["threading", "loky"])
def test_parallel_folds_keep_the_callers_scikit_learn_config_and_warning_filters(backend):
    # Plain joblib carried neither into its tasks, unlike scikit-learn's own
    # cross-validation: the config is thread-local (lost in threads too), and loky's
    # workers start with default warning filters, so n_jobs=2 behaved unlike n_jobs=1.
    import joblib
    import sklearn

    X, y = SCORES[:, None], LABELS
    with joblib.parallel_config(backend=backend), sklearn.config_context(assume_finite=True):
        for n_jobs in (1, 2):
            result = pooled_cross_validate(ConfigProbe(), X, y, n_splits=2, random_state=0,
                                           n_jobs=n_jobs)
            assert set(result.y_score.ravel()) == {1.0}, n_jobs
            with warnings.catch_warnings():
                warnings.simplefilter("error", ProbeWarning)
                with pytest.raises(ProbeWarning, match="a fold's warning"):
                    pooled_cross_validate(ConfigProbe(warn=True), X, y, n_splits=2, random_state=0,
                                          n_jobs=n_jobs)


def test_plots_return_axes():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 2))
    y = (X[:, 0] + rng.normal(size=60) > 0).astype(int)
    result = pooled_cross_validate(LogisticRegression(), X, y, n_splits=3, random_state=0)
    for plot in (result.plot_roc, result.plot_sensitivity_specificity,
                 result.plot_precision_recall):
        ax = plot()
        assert isinstance(ax, matplotlib.axes.Axes) and ax.get_legend() is not None
        _, given = plt.subplots()
        assert plot(given) is given
    axes = result.plot()
    assert len(axes) == 3 and all(isinstance(ax, matplotlib.axes.Axes) for ax in axes)
    assert axes[1].get_xlabel() == "threshold on the predicted probability"
    plt.close("all")


def test_plots_name_the_positive_class_of_the_result():
    # The axes said "Positive label: 1", the 0/1 coding of y_true, for a result of 'dead'.
    labels = np.where(LABELS == 1, "dead", "alive")
    result = pooled_cross_validate(ScoreIsColumnZero(), SCORES[:, None], labels, n_splits=2,
                                   random_state=0)
    roc, curve = result.plot_roc(), result.plot_precision_recall()
    assert (roc.get_xlabel(), roc.get_ylabel()) == (
        "False Positive Rate (Positive label: dead)", "True Positive Rate (Positive label: dead)")
    assert (curve.get_xlabel(), curve.get_ylabel()) == (
        "Recall (Positive label: dead)", "Precision (Positive label: dead)")
    plt.close("all")


# ------------------------------------------------------------ visit features
def test_visit_features_by_hand():
    #                time  a     b
    one = np.array([[0.0, 1.0, np.nan],
                    [2.0, 3.0, 4.0],
                    [4.0, np.nan, 6.0]])
    two = np.array([[10.0, 5.0, 1.0]])
    X = [one, two]
    np.testing.assert_array_equal(VisitFeatures("first", time_feature=0).fit_transform(X),
                                  [[1.0, np.nan], [5.0, 1.0]])
    np.testing.assert_array_equal(VisitFeatures("last", time_feature=0).fit_transform(X),
                                  [[np.nan, 6.0], [5.0, 1.0]])
    summary = VisitFeatures(time_feature=0).fit_transform(X)
    # last observed a, b | mean a, b | slope a (1 per time unit), b (1) | visits, span
    np.testing.assert_allclose(summary, [[3, 6, 2, 5, 1, 1, 3, 4], [5, 1, 5, 1, 0, 0, 1, 0]])
    untimed = VisitFeatures().fit_transform([one[:, 1:]])
    np.testing.assert_allclose(untimed[0, 4:], [2.0, 2.0, 3, 2])  # slopes per visit
    with pytest.raises(ValueError, match="time_feature=5 is out of range"):
        VisitFeatures(time_feature=5).fit(X)
    # Two visits a quarter hour apart keep their slope (diff43: a float32 guess read
    # 0.25 as rounding).
    quarter = [np.array([[0.0, 1.0], [0.25, 3.0]])]
    assert VisitFeatures(time_feature=0).fit(quarter).transform(quarter)[0, 2] == 8.0
    # A kind mistyped with set_params after fit was read as 'summary', names and all.
    fitted = VisitFeatures("first", time_feature=0).fit(X).set_params(kind="frist")
    for method in (lambda: fitted.transform(X), fitted.get_feature_names_out):
        with pytest.raises(ValueError, match=r"The 'kind' parameter of VisitFeatures must be .* Got 'frist' instead"):
            method()
    # A feature never observed in a sequence has no slope (it was 0, an observed flat
    # trend to the imputer after the step); one observation keeps a slope of 0.
    never = np.array([[0.0, 1.0, np.nan], [1.0, 2.0, np.nan]])
    row = VisitFeatures(time_feature=0).fit([never, one]).transform([never])[0]
    np.testing.assert_array_equal(row[:6], [2.0, np.nan, 1.5, np.nan, 1.0, np.nan])


# --------------------------------------------------------------------- study
def test_pbc_cohort_of_the_headline_comparison():
    cohort = load_pbc_cohort(1, 1, 2)
    assert (len(cohort.y), int(cohort.y.sum())) == (208, 86)
    bili = cohort.feature_names.index("bili")
    assert np.nanmax(np.concatenate(cohort.sequences)[:, bili]) < np.log(50)  # log scale


def test_the_pbc_cohort_refuses_the_outcome_as_a_feature_and_spans_not_in_years():
    # features=["bili", "status"] scored a pooled AUC of 1.0 (the outcome read back);
    # spans were checked after turning years into days ("got -365.25", with a hint of
    # 365.25 for one year), and True was one year.
    for leak in (["bili", "status"], ["futime"]):
        with pytest.raises(ValueError, match=r"the columns the outcome is built from.*Leave them out"):
            load_pbc_cohort(1, 1, 2, features=leak)
    for span in (-1, True, "1", float("inf")):
        with pytest.raises(ValueError, match=rf"upper_span must be a finite number >= 0 of years; got {span!r}"):
            load_pbc_cohort(span, 1, 2)
    with pytest.raises(ValueError, match="lower_span must be a finite number >= 0 of years; got -0.5"):
        load_pbc_cohort(1, -0.5, 2)


def test_the_study_models_keep_the_padding_of_a_padded_array_as_padding():
    # 'RNN visit order' numbered the all-NaN padding steps of a (n, T, d) array: each
    # sequence became T visits long, the extra ones with missing features.
    from sklearn_rnn.clinical import study_models
    from sklearn_rnn.sequences import check_sequences

    padded = np.full((2, 4, 2), np.nan)
    padded[0, :2] = [[0.0, 1.0], [30.0, 2.0]]  # 2 visits, then padding
    padded[1, :] = [[0.0, 3.0], [10.0, 4.0], [20.0, 5.0], [40.0, 6.0]]
    models = study_models()
    for name in ("RNN no time", "RNN visit order"):
        out = check_sequences(models[name][0].fit_transform(padded))
        assert [len(sequence) for sequence in out] == [2, 4], name
    numbered = check_sequences(models["RNN visit order"][0].fit_transform(padded))
    np.testing.assert_array_equal(numbered[0], [[0.0, 1.0], [1.0, 2.0]])
    np.testing.assert_array_equal(numbered[1][:, 0], [0.0, 1.0, 2.0, 3.0])


def test_paired_intervals_refuse_results_of_different_positive_classes():
    # They were refused as "scored on different samples".
    from sklearn_rnn.clinical import auc_intervals

    labels = np.where(LABELS == 1, "dead", "alive")
    first = pooled_cross_validate(ScoreIsColumnZero(), SCORES[:, None], labels, n_splits=2, pos_label="dead")
    second = pooled_cross_validate(ScoreIsColumnZero(), SCORES[:, None], labels, n_splits=2, pos_label="alive")
    with pytest.raises(ValueError, match=r"score different positive classes \(pos_label='dead' and 'alive'\)"):
        auc_intervals({"a": first, "b": second}, n_bootstraps=10)


def test_paired_intervals_refuse_results_not_given_by_model_name():
    # A list got Python's "list indices must be integers or slices, not PooledCVResult".
    from sklearn_rnn.clinical import auc_intervals

    result = PooledCVResult(LABELS, SCORES[None], np.array([[0, 1] * 4]), 0.5, 1, 0.0)
    with pytest.raises(TypeError, match=r"^results must be a mapping from model name to PooledCVResult, "
                                        r"e.g. \{'LR': result_lr, 'RNN': result_rnn\}; got list\.$"):
        auc_intervals([result, result], n_bootstraps=10)
    with pytest.raises(TypeError, match=r"^results\['b'\] is a dict, not a PooledCVResult: pass"):
        auc_intervals({"a": result, "b": result.summary()}, n_bootstraps=10)


def test_study_smoke_run():
    study = PBCStudy.quick(n_repeats=1, n_splits=2, search_grid={"spectral_radius": [1.2]},
                           rnn_params={"hidden_size": 3, "max_iter": 1})
    rows = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        folds = []
        models = []
        result = study.run(on_row=lambda part, row: rows.append(part),
                           on_fold=lambda done, total: folds.append((done, total)),
                           on_model=lambda part, name: models.append(name))
    assert rows == ["main"] and len(result.grid) == 0
    assert folds == [(1, 2), (2, 2)]  # progress of the nested search's outer folds
    assert models == list(result.main_results)  # and of the headline table, model by model
    assert result.best_baseline == max(
        ["LR first", "LR last", "LR summary", "LR summary, C tuned"],
        key=lambda name: result.main.loc[0, name])
    intervals = result.intervals
    assert list(intervals.index) == list(result.main_results)
    assert (intervals["auc_low"] <= intervals["auc"]).all()
    assert (intervals["auc"] <= intervals["auc_high"]).all()
    np.testing.assert_allclose(intervals["auc"], result.main.loc[0, list(intervals.index)].astype(float))
    gain, low, high = result.time_gaps_over_visit_order
    assert low <= gain <= high
    assert "(the reference)" in result.interval_table()
    assert result.main.loc[0, ["positives", "negatives"]].tolist() == [86, 122]
    assert result.main.loc[0, "LR last"] > 0.8
    assert result.best_setting == (1.0, 1.0, 2)
    assert result.nested.y_score.shape == (1, 208)
    assert "RNN time gaps" in result.to_string()
    with pytest.raises(ValueError, match="part must be 'main' or 'grid'; got 'Main'"):
        result.to_string("Main")  # gave the grid table
    assert len(result.plot()) == 3
    plt.close("all")


def test_visit_features_name_their_columns_and_check_the_names():
    import pandas as pd
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    rng = np.random.default_rng(0)
    X = [np.c_[np.cumsum(rng.uniform(1, 5, n)), rng.normal(size=(n, 2))] for n in (2, 3, 4, 3)]
    frames = [pd.DataFrame(x, columns=["day", "bili", "albumin"]) for x in X]
    by_name = VisitFeatures(time_feature="day").fit(frames)
    np.testing.assert_array_equal(by_name.transform(frames), VisitFeatures(time_feature=0).fit_transform(X))
    assert by_name.feature_names_in_.tolist() == ["day", "bili", "albumin"]
    assert by_name.get_feature_names_out().tolist() == [
        "last_bili", "last_albumin", "mean_bili", "mean_albumin", "slope_bili", "slope_albumin",
        "n_visits", "span"]
    assert VisitFeatures("first", time_feature="day").fit(frames).get_feature_names_out().tolist() == [
        "first_bili", "first_albumin"]
    # Unnamed sequences get x0, x1, ...; the time column is left out either way.
    assert VisitFeatures("last", time_feature=0).fit(X).get_feature_names_out().tolist() == ["last_x1", "last_x2"]
    with pytest.raises(ValueError, match="input_features should have length equal to the 3 columns"):
        by_name.get_feature_names_out(["a", "b"])
    with pytest.raises(ValueError, match="same order"):
        by_name.transform([frame[["day", "albumin", "bili"]] for frame in frames])
    with pytest.raises(ValueError, match="without column names"):
        VisitFeatures(time_feature="day").fit(X)
    table = make_pipeline(VisitFeatures(time_feature="day"), StandardScaler()).set_output(transform="pandas")
    out = table.fit_transform(frames)
    assert isinstance(out, pd.DataFrame) and out.columns[0] == "last_bili" and len(out) == 4


def test_visit_features_pickled_before_the_step_features_were_recorded_still_transform():
    X = [np.array([[0.0, 1.0], [2.0, 3.0]]), np.array([[0.0, 2.0]])]
    fitted = VisitFeatures(time_feature=0).fit(X)
    old = VisitFeatures(time_feature=0)
    old.n_features_in_ = 2  # the whole state of a VisitFeatures fitted by an earlier version
    np.testing.assert_array_equal(old.transform(X), fitted.transform(X))
    assert old.get_feature_names_out().tolist() == fitted.get_feature_names_out().tolist()


@pytest.mark.parametrize("kind", ["first", "last", "summary"])
@pytest.mark.parametrize("time_feature", [None, 0, -1, "day", "albumin"])
def test_visit_features_name_every_output_column(kind, time_feature):
    import pandas as pd

    rng = np.random.default_rng(1)
    X = [np.c_[np.cumsum(rng.uniform(1, 5, n)), rng.normal(size=n), np.sort(rng.normal(size=n))]
         for n in (1, 2, 4)]  # either column 0 or column 2 may be read as times
    frames = [pd.DataFrame(x, columns=["day", "bili", "albumin"]) for x in X]
    features = VisitFeatures(kind, time_feature=time_feature)
    out = features.fit_transform(frames)
    names = features.get_feature_names_out()
    assert out.shape == (3, len(names)) and len(set(names)) == len(names)
    time = {None: None, 0: "day", -1: "albumin", "day": "day", "albumin": "albumin"}[time_feature]
    assert not any(name.endswith(f"_{time}") for name in names)
    if not isinstance(time_feature, str):  # the same features from arrays
        np.testing.assert_array_equal(VisitFeatures(kind, time_feature=time_feature).fit_transform(X), out)


@pytest.mark.parametrize("times, message", [
    ([0.0, np.nan, 4.0], "no time at step 1"), ([5.0, 1.0, 4.0], "decrease"),
])
def test_visit_features_refuse_the_times_the_estimators_refuse(times, message):
    # A NaN time gave a slope of 0 and a decreasing one a negative span, silently.
    good = [np.array([[0.0, 1.0], [1.0, 0.0]])]
    bad = [np.c_[times, [1.0, 2.0, 3.0]], *good]
    with pytest.raises(ValueError, match=message):
        VisitFeatures(time_feature=0).fit(bad)
    fitted = VisitFeatures(time_feature=0).fit(good)
    with pytest.raises(ValueError, match=message):
        fitted.transform(bad)


def test_pooled_cross_validation_splits_a_panel_by_instance():
    # A panel has a row per step: "X has 89 samples but y has 24".
    import pandas as pd

    rng = np.random.default_rng(0)
    frames = [pd.DataFrame({"bili": rng.normal(size=n)}) for n in rng.integers(2, 6, 24)]
    y = np.array([int(frame["bili"].iloc[-1] > 0) for frame in frames])
    panel = pd.concat({f"p{i:02d}": frame for i, frame in enumerate(frames)}, names=["patient", "visit"])
    model = RNNClassifier(hidden_size=3, max_iter=2, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        from_panel = pooled_cross_validate(model, panel, y, n_splits=3, random_state=0)
        from_frames = pooled_cross_validate(model, frames, y, n_splits=3, random_state=0)
    np.testing.assert_array_equal(from_panel.y_score, from_frames.y_score)


@pytest.mark.filterwarnings("ignore:The PyTorch API of nested tensors is in prototype stage")
@pytest.mark.parametrize("layout", ["strided", "jagged"])
def test_pooled_cross_validation_reads_a_torch_nested_tensor_as_its_sequences(layout):
    # fit takes a nested tensor; the folds failed with "NestedTensorImpl doesn't support
    # sizes" (X.shape) or "aten.index.Tensor" (indexing a jagged one).
    import torch
    from sklearn.impute import SimpleImputer

    rng = np.random.default_rng(0)
    sequences = [torch.tensor(rng.normal(size=(int(rng.integers(2, 5)), 2))) for _ in range(12)]
    y = np.array([0, 1] * 6)
    nested = torch.nested.nested_tensor(sequences, layout=getattr(torch, layout))
    model = make_pipeline(VisitFeatures("summary"), SimpleImputer(), LogisticRegression())
    from_nested = pooled_cross_validate(model, nested, y, n_splits=3, random_state=0)
    from_list = pooled_cross_validate(model, sequences, y, n_splits=3, random_state=0)
    np.testing.assert_array_equal(from_nested.y_score, from_list.y_score)


def test_visit_features_in_scikit_learn_composites_name_and_index_their_output():
    # get_feature_names_out refused fit's own feature_names_in_ (a table's columns) and a
    # sequence column's name, so ColumnTransformer.get_feature_names_out failed; on a
    # panel, set_output(transform="pandas") gave the rows the panel's index (a row per
    # visit) and failed.
    import pandas as pd
    from sklearn.compose import ColumnTransformer
    from sklearn.utils.estimator_checks import (
        check_transformer_get_feature_names_out,
        check_transformer_get_feature_names_out_pandas,
    )

    from sklearn_rnn.sequences import sequence_column

    check_transformer_get_feature_names_out("VisitFeatures", VisitFeatures())
    check_transformer_get_feature_names_out_pandas("VisitFeatures", VisitFeatures())
    rng = np.random.default_rng(0)
    wide = pd.DataFrame(rng.normal(size=(6, 4)), columns=["m1", "m2", "m3", "m4"])
    last = VisitFeatures("last").fit(wide)
    assert last.get_feature_names_out(last.feature_names_in_).tolist() == ["last_x0"]
    sequences = [np.c_[np.arange(n, dtype=float), rng.normal(size=n)] for n in (3, 4, 5)]
    frame = pd.DataFrame({"seq": list(sequence_column(sequences)[:, 0]), "age": [50.0, 60.0, 70.0]})
    columns = ColumnTransformer([("v", VisitFeatures("last", time_feature=0), ["seq"]),
                                 ("s", "passthrough", ["age"])]).fit(frame)
    assert columns.get_feature_names_out().tolist() == ["v__last_x1", "s__age"]
    panel = pd.concat({p: pd.DataFrame(x, columns=["day", "bili"]) for p, x in zip("bca", sequences)},
                      names=["patient", "visit"])
    out = VisitFeatures(time_feature="day").set_output(transform="pandas").fit_transform(panel)
    assert out.index.tolist() == ["b", "c", "a"] and out.columns[0] == "last_bili"
    np.testing.assert_array_equal(out.to_numpy(), VisitFeatures(time_feature=0).fit_transform(sequences))


@pytest.mark.parametrize(
    ("settings", "error", "match"),
    [
        ({"grid_repeats": 0}, ValueError, r"PBCStudy.grid_repeats must be an int >= 1; got 0"),
        ({"n_repeats": True}, ValueError, r"PBCStudy.n_repeats must be an int >= 1; got True"),
        ({"n_splits": 1}, ValueError, r"PBCStudy.n_splits must be an int >= 2; got 1"),
        ({"threshold": 2}, ValueError, r"PBCStudy.threshold must be a probability in \[0, 1\]; got 2"),
        ({"n_jobs": 0}, ValueError, r"PBCStudy.n_jobs must be None or a nonzero int"),
        ({"main_setting": (1, -1, 2)}, ValueError, r"PBCStudy.main_setting=\(1, -1, 2\) must be \(upper_span, "
         r"lower_span, min_visits\).*lower_span must be a finite number >= 0 of years; got -1"),
        ({"grid": [(1, 1, 2), (1, 1)]}, ValueError, r"PBCStudy.grid\[1\]=\(1, 1\) must be \(upper_span"),
        ({"grid": None}, TypeError, r"PBCStudy.grid must be a sequence of \(upper_span, lower_span, "
         r"min_visits\), e.g. \(\(1, 1, 2\), \(2, 1, 2\)\) or \(\) for none; got None"),
        ({"grid": [(2, 2, 5)], "n_splits": 50}, ValueError,
         r"PBCStudy.n_splits=50 does not suit the cohort PBCStudy.grid\[0\]=\(2, 2, 5\), whose "
         r"smaller class has 43 patients: every stratified fold needs both classes, so at most 43 "
         r"folds\. Choose n_splits from 2 to 43, or leave that cohort out\.$"),
        # the inner 5-fold search of the C-tuned regression needs 5 of each class in every
        # outer training fold: 2 folds of 8 keep 4 (it chose among NaN scores)
        ({"grid": [(6, 1, 6)]}, ValueError,
         r"PBCStudy.n_splits=2 does not suit the cohort PBCStudy.grid\[0\]=\(6, 1, 6\), whose "
         r"smaller class has 8 patients: an outer training fold would keep only 4 of them, and the "
         r"inner 5-fold search .* needs 5 \(one per inner fold\)\. Choose n_splits from 3 to 8, "),
        ({"main_setting": (10, 1, 2), "n_splits": 3}, ValueError,
         r"PBCStudy.n_splits=3 does not suit the cohort PBCStudy.main_setting=\(10, 1, 2\), whose "
         r"smaller class has 3 patients: .* Each class needs at least 6 patients: leave that "
         r"cohort out\.$"),
        ({"search_grid": {"spectral_raduis": [0.9]}}, ValueError,
         r"PBCStudy.search_grid=\{'spectral_raduis': \[0.9\]\} must map parameters of RNNClassifier.*"
         r"Invalid parameter 'spectral_raduis'"),
        ({"search_grid": {"spectral_radius": 0.9}}, TypeError, r"PBCStudy.search_grid=.*needs to be a list"),
        ({"search_grid": {"spectral_radius": [-1.0]}}, ValueError, r"PBCStudy.search_grid=.*'spectral_radius'"),
        ({"search_grid": {"dropout": [0.2]}}, ValueError, r"PBCStudy.search_grid=.*cannot be stacked"),
        ({"rnn_params": {"hiden_size": 2}}, TypeError, r"PBCStudy.rnn_params=.*unexpected keyword argument 'hiden_size'"),
        ({"rnn_params": {"hidden_size": 0}}, ValueError, r"PBCStudy.rnn_params=.*'hidden_size' parameter"),
        # A bad random_state was blamed on rnn_params={}; the keys the study sets itself
        # were "not parameters of RNNClassifier" (Python's "got multiple values").
        ({"random_state": -1}, ValueError, r"^PBCStudy.random_state must be an int in \[0, 4294967295\] "
         r"or None; got -1\.$"),
        ({"random_state": 1.5}, ValueError, r"^PBCStudy.random_state must be an int .*got 1.5\.$"),
        ({"rnn_params": {"random_state": 1}}, ValueError, r"^PBCStudy.rnn_params may not set random_state "
         r"\(use PBCStudy.random_state\) or time_feature \(each study model sets its own\); got "
         r"\['random_state'\]\.$"),
        ({"rnn_params": {"time_feature": None, "hidden_size": 2}}, ValueError,
         r"^PBCStudy.rnn_params may not set .*; got \['time_feature'\]\.$"),
    ],
)
def test_the_study_refuses_its_settings_before_fitting_any_model(monkeypatch, settings, error, match):
    # grid_repeats=0 failed once the headline cohort was scored, naming n_repeats; a typo
    # in search_grid only in the nested search, after the grid, the work of minutes lost.
    from sklearn_rnn.clinical import _pbc_study

    def no_model(*args, **kwargs):
        raise AssertionError("a model was fitted before the settings were checked")

    monkeypatch.setattr(_pbc_study, "pooled_cross_validate", no_model)
    study = PBCStudy(**{"grid": (), "n_repeats": 1, "n_splits": 2, **settings})
    with pytest.raises(error, match=match):
        study.run()


def test_the_study_takes_its_grid_as_an_iterator_once(monkeypatch):
    # The settings check used up itertools.product(...), and run failed after the whole
    # headline table with "zip() argument 2 is longer than argument 1".
    import itertools

    from sklearn_rnn.clinical import _pbc_study

    def fake(model, X, y, *, n_splits, n_repeats, threshold, random_state, n_jobs, on_fold=None):
        scores = np.random.default_rng(len(X)).random((n_repeats, len(y)))
        folds = np.tile(np.arange(len(y)) % n_splits, (n_repeats, 1))
        return PooledCVResult(np.asarray(y), scores, folds, threshold, 1, 0.0)

    monkeypatch.setattr(_pbc_study, "pooled_cross_validate", fake)
    result = PBCStudy(grid=itertools.product((1, 2), (1,), (2,)), n_repeats=1).run()
    assert result.grid[["upper_span", "lower_span", "min_visits"]].values.tolist() == [[1, 1, 2], [2, 1, 2]]


@pytest.mark.parametrize("time", [0.1, 0.7, 1 / 3])
def test_a_feature_observed_only_at_one_time_has_a_slope_of_zero(time):
    # Three visits at 0.1 average to 0.1 + 1.4e-17: the rounding, squared, divided the
    # slope, which came out as -10.7 (and +1.3 at 0.7) instead of the documented 0.
    visits = [np.array([[time, 1.0], [time, 2.0], [time, 4.3]]), np.array([[0.0, 1.0], [2.0, 5.0]])]
    features = VisitFeatures("summary", time_feature=0).fit_transform(visits)
    names = VisitFeatures("summary", time_feature=0).fit(visits).get_feature_names_out().tolist()
    slope = names.index("slope_x1")
    assert features[0, slope] == 0.0 and features[1, slope] == 2.0


def test_times_equal_up_to_rounding_give_a_slope_of_zero():
    # 0.3 and 0.1 + 0.2 (one unit in the last place apart) gave a slope of 9e15.
    visits = [np.array([[0.3, 1.0], [0.1 + 0.2, 2.0]])]
    summary = VisitFeatures("summary", time_feature=0).fit(visits)
    slope = summary.get_feature_names_out().tolist().index("slope_x1")
    assert summary.transform(visits)[0, slope] == 0.0


def test_visit_summaries_of_values_near_the_float64_limit_are_finite():
    # A plain mean and dot product overflowed: values at 1e308 gave a mean of inf and a
    # slope of NaN, times 1e160 apart a slope of 0 (the spread's square was inf).
    import warnings

    from sklearn_rnn.clinical import VisitFeatures

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nor a RuntimeWarning of overflow
        huge = VisitFeatures(time_feature=0).fit_transform([np.array([[0.0, 1e308], [1.0, 1e308], [2.0, 1e308]])])
        apart = VisitFeatures(time_feature=0).fit_transform([np.array([[0.0, 1.0], [1e160, 2.0], [2e160, 3.0]])])
    np.testing.assert_allclose(huge, [[1e308, 1e308, 0.0, 3.0, 2.0]])
    np.testing.assert_allclose(apart, [[3.0, 2.0, 1e-160, 3.0, 2e160]])


def test_a_cohort_given_whole_to_pooled_cross_validate_is_told_to_pass_its_sequences():
    # len() of the Cohort: Python's bare "object of type 'Cohort' has no len()".
    from sklearn_rnn.clinical import build_cohort, pooled_cross_validate

    rng = np.random.default_rng(0)
    visits = pd.DataFrame([(i, t, rng.normal()) for i in range(24) for t in range(3)], columns=["id", "t", "x"])
    cohort = build_cohort(visits, id_column="id", time_column="t", event_time={i: 10 for i in range(0, 24, 2)},
                          upper_span=0, lower_span=0, min_visits=1)
    with pytest.raises(TypeError, match=r"X is a Cohort: .*cohort\.sequences, cohort\.y"):
        pooled_cross_validate(LogisticRegression(), cohort, cohort.y, n_splits=3)


def test_a_study_keeps_an_iterator_grid_and_seeds_the_tuned_regressions_folds():
    # A grid given as an iterator was used up by the first run (a second had no grid);
    # the inner folds tuning the summary regression's C kept seed 0 whatever the seed.
    import itertools

    from sklearn.model_selection import StratifiedKFold

    from sklearn_rnn.clinical import PBCStudy, study_models

    study = PBCStudy(grid=itertools.product([1, 2], [1], [2]))
    assert study.grid == ((1, 1, 2), (2, 1, 2))
    tuned = study_models(random_state=3)["LR summary, C tuned"]
    folds = [value for name, value in tuned.get_params().items() if name.endswith("__cv")]
    assert folds and all(isinstance(cv, StratifiedKFold) and cv.random_state == 3 for cv in folds)


def test_pooled_results_plots_refuse_a_repeat_or_axes_they_cannot_draw_and_a_model_without_probabilities():
    # Bare IndexErrors, after an empty figure was made; LinearSVC failed after the first fold's fit.
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from sklearn.svm import LinearSVC

    result = PooledCVResult(LABELS, SCORES[None], np.array([[0, 1] * 4]), 0.5, 1, 0.0)
    figures = len(plt.get_fignums())
    for plot in (result.plot_roc, result.plot_sensitivity_specificity, result.plot_precision_recall, result.plot):
        with pytest.raises(ValueError, match=r"^repeat must be an int in \[0, n_repeats\) = \[0, 1\); got 1\.$"):
            plot(repeat=1)
    assert len(plt.get_fignums()) == figures  # no figure left behind
    figure, two = plt.subplots(1, 2)
    try:
        with pytest.raises(ValueError, match=r"axes must hold 3 Axes; got 2"):
            result.plot(two)
    finally:
        plt.close(figure)
    X = np.random.default_rng(0).normal(size=(40, 2))
    with pytest.raises(TypeError, match=r"LinearSVC has no predict_proba.*CalibratedClassifierCV\(LinearSVC\(\)\)"):
        pooled_cross_validate(LinearSVC(), X, (X[:, 0] > 0).astype(int), n_splits=4)


def test_study_settings_and_results_are_checked_in_their_own_words():
    # clin44: a grid iterator set after construction was used up by the first run (the
    # second silently had no grid); study_models(time_feature=0) met "got multiple values
    # for keyword argument"; repeats with different numbers of folds met scikit-learn's
    # "Found array with 0 sample(s)"; the sensitivity-specificity curves stopped at the
    # lowest score.
    from sklearn_rnn.clinical import PBCStudy, PooledCVResult, study_models

    study = PBCStudy.quick()
    study.grid = iter([(1, 1, 2), (2, 1, 2)])
    assert study._check_settings()[2] == study._check_settings()[2] == [(1, 1, 2), (2, 1, 2)]
    with pytest.raises(ValueError, match=r"study_models sets each RNN's time_feature itself .* got time_feature=0"):
        study_models(time_feature=0)
    with pytest.raises(ValueError, match=r"the same number of test folds in every repeat .* repeat 0 has 3 and "
                                         r"repeat 1 has 2"):
        PooledCVResult(y_true=np.array([0, 1, 0, 1, 0, 1]), y_score=np.array([[0.1, 0.9, 0.2, 0.8, 0.3, 0.7]] * 2),
                       folds=np.array([[0, 0, 1, 1, 2, 2], [0, 0, 0, 1, 1, 1]]), threshold=0.5, pos_label=1,
                       fit_seconds=0.0)
    result = PooledCVResult(y_true=np.array([0, 0, 1, 0, 1, 1]), y_score=np.array([[0.3, 0.4, 0.35, 0.45, 0.8, 0.7]]),
                            folds=np.array([[0, 0, 0, 1, 1, 1]]), threshold=0.5, pos_label=1, fit_seconds=0.0)
    ax = result.plot_sensitivity_specificity()
    sensitivity, specificity = ax.get_lines()[:2]
    assert sensitivity.get_xdata()[-1] == specificity.get_xdata()[-1] == 0.0
    assert sensitivity.get_ydata()[-1] == 1.0 and specificity.get_ydata()[-1] == 0.0
    plt.close("all")
