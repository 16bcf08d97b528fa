"""
======================================================================
Visit histories at irregular times: the lupus study redone on PBC data
======================================================================

The thesis (section 4.3) predicts, from a lupus patient's history of visits months or
years apart, whether organ damage will appear; its patients are private. Here the same
protocol runs on the public Mayo Clinic primary biliary cholangitis (PBC) data shipped
with the package (:func:`~sklearn_rnn.datasets.load_pbcseq`: 312 patients, 1,945 visits
at irregular days): predict **death at least a year ahead** from the visits so far.

The original ignored the time between visits. Here the visit day is a ``time_feature``:
the network reads the gap since the previous visit and the time since the first one,
in a unit-free scale, and the default cell for timed sequences is a continuous-time
recurrence whose units relax towards each new visit the further the longer the gap.

Everything below is one implementation shared with ``python -m sklearn_rnn``:
:class:`~sklearn_rnn.clinical.PBCStudy`. Set ``SKLEARN_RNN_QUICK=1`` for a short run
(one shuffle of the folds, no grid of cohorts).
"""

# %%
# The cohort: the thesis' selection protocol
# ------------------------------------------
# Patients who had a liver transplant are left out. A patient who died is a positive,
# cut one year (``upper_span``) before death; a patient alive at the end of follow-up
# is a negative, cut one year before it; the kept visits must span at least a year
# (``lower_span``) and number at least 2 (``min_visits``). Skewed labs are on a log
# scale. Column 0 of every sequence is the visit day.
import os
import warnings

import matplotlib.pyplot as plt
import numpy as np
from imblearn.over_sampling import RandomOverSampler
from imblearn.pipeline import make_pipeline as make_imblearn_pipeline
from sklearn.exceptions import ConvergenceWarning

from sklearn_rnn import RNNClassifier, SequenceStandardScaler
from sklearn_rnn.clinical import PBCStudy, load_pbc_cohort, pooled_cross_validate
from sklearn_rnn.sequences import sequence_column

warnings.simplefilter("ignore", ConvergenceWarning)
QUICK = os.environ.get("SKLEARN_RNN_QUICK") == "1"

cohort = load_pbc_cohort(upper_span=1, lower_span=1, min_visits=2)
print(cohort)
print(cohort.summary)
gaps = np.concatenate([np.diff(sequence[:, 0]) for sequence in cohort.sequences])
print(f"visits per patient: {min(map(len, cohort.sequences))}-{max(map(len, cohort.sequences))}; "
      f"days between visits: median {np.median(gaps):.0f}, 5%-95% "
      f"{np.percentile(gaps, 5):.0f}-{np.percentile(gaps, 95):.0f}")

# %%
# The study: pooled 8-fold ROC AUC of seven models
# ------------------------------------------------
# Every model is a pipeline reading the same sequences: logistic regressions on the
# first visit, the last visit and a summary of the history (last value, mean and
# slope of every feature, number of visits, time covered), at scikit-learn's defaults
# and with ``C`` tuned; the RNN classifier **at its defaults** without the time column,
# with the visit number in place of the day (the same model, but every gap is one
# visit), and with the real days (``time_feature=0``). For each model the out-of-fold
# probabilities of the 8 test folds are pooled into one ROC AUC
# (:func:`~sklearn_rnn.clinical.pooled_cross_validate`), averaged over shuffles of the
# folds. The full run adds the grid of the thesis' Table 4.4 (upper span x lower span
# x min visits) and runs in under 15 minutes on two cores.
if QUICK:
    study = PBCStudy.quick(n_repeats=1, search_grid={"spectral_radius": [0.9, 1.2]}, n_jobs=-1)
else:
    study = PBCStudy(n_jobs=-1)
result = study.run()
print(result.to_string("main"))

# %%
# Every AUC with its 95% interval (a stratified bootstrap over patients), and the
# paired difference to the best logistic regression: an interval that contains 0
# means these patients cannot tell the two models apart.
print(result.interval_table())
gain, low, high = result.time_gaps_over_visit_order
print(f"real gaps over visit order: {gain:+.3f} [{low:+.3f}, {high:+.3f}]")

# %%
# The grid of cohorts (full run only): the thesis reported pooled AUCs of 0.62-0.77 on
# its lupus cohorts; ``pos`` and ``neg`` count the patients each protocol keeps.
if len(result.grid):
    print(result.to_string("grid"))

# %%
# The best setting: nested search and curves
# ------------------------------------------
# On the cohort where the RNN with time gaps scored best, a nested
# :class:`~sklearn_rnn.RNNGridSearchCV` (the package's search, which trains a grid's
# networks together and scores as GridSearchCV does) chooses ``spectral_radius`` and
# ``clip_threshold`` inside each training fold (inner 3-fold ROC AUC), so the pooled
# AUC of the outer folds is not tuned on the patients it scores. Its pooled
# probabilities give the three curves of the thesis: the ROC curve, sensitivity and
# specificity against the threshold, and precision against recall.
print(f"best setting (upper, lower, visits): {result.best_setting}")
print({name: round(value, 3) for name, value in result.nested.summary().items()})
axes = result.plot()
plt.show()

# %%
# Class imbalance: balanced batches, or an imbalanced-learn sampler
# -----------------------------------------------------------------
# 86 deaths against 122 survivors is a mild imbalance; the lupus cohort had 38
# positives in 413. The original drew mini-batches of 10 positives and 10 negatives
# (with replacement): ``balanced_batches=True``. An imbalanced-learn sampler can
# instead resample whole sequences before training, when the sequences travel as a
# one-column object array (:func:`~sklearn_rnn.sequences.sequence_column`); samplers
# that interpolate (SMOTE) cannot apply to sequences.
X, y = cohort.sequences, cohort.y
n_repeats = 1 if QUICK else 3
variants = {
    "defaults": (SequenceStandardScaler(), RNNClassifier(time_feature=0, random_state=0)),
    "balanced_batches=True": (
        SequenceStandardScaler(),
        RNNClassifier(time_feature=0, balanced_batches=True, random_state=0),
    ),
    "RandomOverSampler": (
        RandomOverSampler(random_state=0),
        SequenceStandardScaler(),
        RNNClassifier(time_feature=0, random_state=0),
    ),
}
for name, steps in variants.items():
    scores = pooled_cross_validate(
        make_imblearn_pipeline(*steps), sequence_column(X), y,
        n_repeats=n_repeats, random_state=0, n_jobs=-1,
    ).summary()
    print(f"{name:22s} pooled AUC {scores['pooled_auc']:.3f}  recall {scores['recall']:.2f}  "
          f"specificity {scores['specificity']:.2f}")

# %%
# Which feature, which visit
# --------------------------
# Clinicians ask first what drove a prediction. One model (the RNN with time gaps at
# its defaults) is fitted on three quarters of the cohort and inspected on the held-out
# quarter. :func:`~sklearn_rnn.inspection.sequence_permutation_importance` shuffles
# one measurement across patients, visit by visit counted back from the prediction
# (the visit day through its gaps), and reports the drop of the ROC AUC;
# :func:`~sklearn_rnn.inspection.visit_importance` exchanges a whole visit, the last,
# the one before, ..., between patients.
from sklearn.model_selection import train_test_split
from sklearn.pipeline import make_pipeline

from sklearn_rnn.inspection import (
    integrated_gradients,
    plot_attributions,
    sequence_permutation_importance,
    visit_importance,
)

names = cohort.feature_names
X_train, X_test, y_train, y_test = train_test_split(
    X, y, test_size=0.25, stratify=y, random_state=0
)
inspected = make_pipeline(
    SequenceStandardScaler(), RNNClassifier(time_feature=0, random_state=0)
).fit(X_train, y_train)
repeats = 2 if QUICK else 10
features = sequence_permutation_importance(
    inspected, X_test, y_test, scoring="roc_auc", n_repeats=repeats, random_state=0
)
print(f"held-out ROC AUC {features.baseline_score:.3f}; drop when shuffled:")
for index in np.argsort(-features.importances_mean):
    print(f"  {names[index]:10s} {features.importances_mean[index]:+.3f} "
          f"(sd {features.importances_std[index]:.3f})")
visits = visit_importance(
    inspected, X_test, y_test, scoring="roc_auc", max_visits=4, n_repeats=repeats,
    random_state=0,
)
for back, (drop, count) in enumerate(zip(visits.importances_mean, visits.n_sequences)):
    label = "last visit" if back == 0 else f"visit {back} before the last"
    print(f"  {label:25s} {drop:+.3f}  ({count} patients have one)")

# %%
# One patient's prediction, step by step: integrated gradients attribute the log-odds
# of death to every visit and measurement (red raises the risk, blue lowers it),
# against the same visits with every measurement at the training mean.
patient = int(np.argmax(inspected.predict_proba(X_test)[:, 1]))
attribution = integrated_gradients(inspected, X_test[patient])
print(f"log-odds {attribution.output:.2f} against {attribution.baseline_output:.2f} "
      "for average values at the same visits")
ax = plot_attributions(  # the time column, which gets no attribution, is left out
    attribution, feature_names=names[1:], times=np.round(attribution.times / 365.25, 1),
)
ax.set_xlabel("visit (years since registration)")
ax.set_title("Attribution of one patient's predicted risk of death")
plt.show()

# %%
# Your own visit table
# --------------------
# Nothing above is specific to PBC: :func:`~sklearn_rnn.clinical.build_cohort` applies
# the protocol to any long table (one row per visit: patient id, time, features, and an
# event per visit or an event time per patient), and
# :func:`~sklearn_rnn.sequences.to_long_format` puts predictions back next to the ids.
print(f"study done in {result.seconds:.0f} s")
