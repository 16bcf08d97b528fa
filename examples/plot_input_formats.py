"""
=====================================================
Input formats: lists, padded arrays, tables, samplers
=====================================================

The estimators take sequences in several forms and read them all the same way (see
:ref:`input_formats`). This example fits one classifier and checks that the ragged
list, the NaN-padded array and the sequence column give identical predictions, goes
from a long table of visits to sequences and back, and rebalances rare classes with
imbalanced-learn.
"""

# %%
# Ragged sequences, and the same data padded
# ------------------------------------------
import os
import warnings

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from imblearn.over_sampling import RandomOverSampler
from imblearn.pipeline import make_pipeline
from sklearn.exceptions import ConvergenceWarning
from sklearn.metrics import balanced_accuracy_score

from sklearn_rnn import RNNClassifier, SequenceStandardScaler
from sklearn_rnn.sequences import from_long_format, sequence_column, to_long_format

QUICK = os.environ.get("SKLEARN_RNN_QUICK") == "1"
n_samples, max_iter = (240, 15) if QUICK else (1200, 60)
warnings.simplefilter("ignore", ConvergenceWarning)  # short runs in quick mode

rng = np.random.default_rng(0)
lengths = rng.geometric(0.08, size=n_samples).clip(2, 60)  # many short, a few long
X = [rng.normal(size=(length, 2)) for length in lengths]
# A rare positive class (about 1 in 6): the running mean of channel 0 ends high.
y = np.array([int(x[:, 0].mean() > 0.35) for x in X])
print(f"{n_samples} sequences of {lengths.min()}-{lengths.max()} steps, {y.mean():.0%} positive")

padded = np.full((n_samples, lengths.max(), 2), np.nan)  # trailing NaN rows: padding
for i, x in enumerate(X):
    padded[i, : len(x)] = x

clf = RNNClassifier(hidden_size=16, max_iter=max_iter, random_state=0).fit(X, y)
p_list = clf.predict_proba(X)
p_padded = clf.predict_proba(padded)
p_column = clf.predict_proba(sequence_column(X))
print("list == padded:", np.allclose(p_list, p_padded))
print("list == column:", np.allclose(p_list, p_column))

# %%
# From a long table and back
# --------------------------
# A long table has one row per observation; here, the first three sequences with a
# sample id and a step counter. :func:`~sklearn_rnn.sequences.from_long_format`
# rebuilds the sequences (time column first) and
# :func:`~sklearn_rnn.sequences.to_long_format` keys the predictions by id.
long_table = pd.concat(
    [
        pd.DataFrame({"sample": f"s{i}", "step": np.arange(len(x)), "a": x[:, 0], "b": x[:, 1]})
        for i, x in enumerate(X[:3])
    ]
)
print(long_table.head())
sequences, ids = from_long_format(long_table, id_column="sample", time_column="step")
features = [s[:, 1:] for s in sequences]  # drop the step counter
print(to_long_format(clf.predict_proba(features), ids, id_column="sample", columns=clf.classes_))

# %%
# Rare positives: oversampling whole sequences
# --------------------------------------------
# imbalanced-learn's samplers need a 2D ``X``; the sequence column is one. The
# pipeline resamples at ``fit`` only.
X_train, y_train = X[: n_samples // 2], y[: n_samples // 2]
X_test, y_test = X[n_samples // 2 :], y[n_samples // 2 :]
plain = make_pipeline(
    SequenceStandardScaler(), RNNClassifier(hidden_size=16, max_iter=max_iter, random_state=0)
)
resampled = make_pipeline(
    SequenceStandardScaler(),
    RandomOverSampler(random_state=0),
    RNNClassifier(hidden_size=16, max_iter=max_iter, random_state=0),
)
scores = {}
for name, model in {"plain": plain, "oversampled": resampled}.items():
    model.fit(sequence_column(X_train), y_train)
    scores[name] = balanced_accuracy_score(y_test, model.predict(sequence_column(X_test)))
    print(f"{name}: balanced accuracy {scores[name]:.3f}")

# %%
# What the sampler did to the training set, and the lengths the model saw:
_, y_resampled = RandomOverSampler(random_state=0).fit_resample(sequence_column(X_train), y_train)
fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.6))
left.hist(lengths, bins=30, color="C0")
left.set_xlabel("steps per sequence")
left.set_ylabel("sequences")
left.set_title("Ragged lengths, no padding needed")
counts = [np.bincount(y_train, minlength=2), np.bincount(y_resampled, minlength=2)]
for offset, (label, count) in zip((-0.2, 0.2), zip(("before", "after oversampling"), counts)):
    right.bar(np.arange(2) + offset, count, width=0.4, label=label)
right.set_xticks([0, 1], ["negative", "positive"])
right.set_ylabel("training sequences")
right.set_title("Class balance")
right.legend()
fig.tight_layout()
plt.show()
