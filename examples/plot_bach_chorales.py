"""
==================================================
Polyphonic music: predicting Bach chorales by beat
==================================================

The thesis' section 4.2 predicts, at every beat of a piece, which of the 88 piano keys
sound at the next beat: a loss at every step, one Bernoulli variable per key (eq. 4.2).
This example repeats its Figure 4.3 and Tables 4.2-4.3 on Bach's chorales from the
music21 corpus (:func:`~sklearn_rnn.datasets.load_bach_chorales`) with
:class:`~sklearn_rnn.RNNStepClassifier`: hidden sizes 50, 100 and 200, sequences
cropped to at most 300 steps, gradient clipping at 3, training and validation NLL per
step after every epoch, test NLL per step of the best epoch, and two baselines
measured on the same split. It needs music21 (``pip install music21``); the first
call of the loader parses the corpus (about a minute) and caches it.

Set ``SKLEARN_RNN_QUICK=1`` for a short run (a few epochs: the curves and numbers are
then far from converged). The full run's numbers are in :ref:`music`.
"""

# %%
# Data: piano rolls, inputs and next-step targets
# -----------------------------------------------
# Each chorale is a ``(T, 88)`` roll of zeros and ones, one row per quarter note.
# The inputs are the rows up to the second to last, the targets the rows from the
# second on: at step ``t`` the network has read beats ``1..t`` and predicts beat
# ``t + 1``.
import copy
import os
import time

import matplotlib.pyplot as plt
import numpy as np
from sklearn.metrics import log_loss

from sklearn_rnn import RNNStepClassifier
from sklearn_rnn.datasets import load_bach_chorales

QUICK = os.environ.get("SKLEARN_RNN_QUICK") == "1"
MAX_STEPS = 300  # the thesis cropped MuseData pieces to 300 steps
max_epochs, patience = (6, 6) if QUICK else (150, 15)

chorales = load_bach_chorales()


def inputs_and_targets(rolls):
    rolls = [roll[: MAX_STEPS + 1] for roll in rolls]
    return [roll[:-1] for roll in rolls], [roll[1:] for roll in rolls]


X_train, y_train = inputs_and_targets(chorales.train)
X_valid, y_valid = inputs_and_targets(chorales.validation)
X_test, y_test = inputs_and_targets(chorales.test)
for name, y in [("train", y_train), ("validation", y_valid), ("test", y_test)]:
    steps = np.array([len(t) for t in y])
    print(f"{name:>10}: {len(y)} chorales, {steps.sum()} steps "
          f"(longest {steps.max()}), {np.concatenate(y).sum(1).mean():.2f} notes per step")

# %%
# Two baselines
# -------------
# *Note frequency*: every key is a constant Bernoulli variable whose probability is
# its frequency in the training targets (add-one smoothed: a key never heard in
# training keeps a small probability). *Repeat the last beat*: the keys that sound now
# sound next, smoothed towards the frequencies, ``p = (1 - s) x_t + s f``, with ``s``
# chosen on the validation set. Both are scored with the same measure as the network:
# the negative log-likelihood summed over the 88 keys, per step.
all_train = np.concatenate(y_train)
frequency = (all_train.sum(0) + 1) / (len(all_train) + 2)


def nll_per_step(probabilities, targets):
    p, t = np.concatenate(probabilities).ravel(), np.concatenate(targets).ravel()
    return log_loss(t, p, normalize=False, labels=[0, 1]) / len(np.concatenate(targets))


def constant(X):
    return [np.broadcast_to(frequency, x.shape) for x in X]


def repeat(X, s):
    return [(1 - s) * x + s * frequency for x in X]


smoothings = [0.02, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 0.95]
smoothing = min(smoothings, key=lambda s: nll_per_step(repeat(X_valid, s), y_valid))
baselines = {
    "note frequency": {
        split: nll_per_step(constant(X), y)
        for split, X, y in [("train", X_train, y_train), ("valid", X_valid, y_valid),
                            ("test", X_test, y_test)]
    },
    f"repeat last beat (s={smoothing})": {
        split: nll_per_step(repeat(X, smoothing), y)
        for split, X, y in [("train", X_train, y_train), ("valid", X_valid, y_valid),
                            ("test", X_test, y_test)]
    },
}

# %%
# Training with a validation curve
# --------------------------------
# One epoch at a time with ``partial_fit``, measuring the NLL per step of the whole
# training and validation sets after each (:meth:`~sklearn_rnn.RNNStepClassifier.nll_per_step`),
# and keeping the model of the best validation epoch; training stops after
# ``patience`` epochs without improvement. A ``RandomState`` as ``random_state``
# gives every epoch a new shuffle while the run stays reproducible. Adam with the
# gradient norm clipped at 3, as the thesis clipped at 3 (it does not give its
# learning rate); then, on the middle size, the thesis' simplex method and its
# clipped anti-gradient ('sgd'). Every run is seeded with ``RandomState(0)``.


def train(seed=0, **params):
    model = RNNStepClassifier(clip_threshold=3.0, random_state=np.random.RandomState(seed),
                              **params)
    curves = {"train": [], "valid": []}
    best, best_epoch = None, 0
    start = time.process_time()
    for epoch in range(1, max_epochs + 1):
        model.partial_fit(X_train, y_train)
        curves["train"].append(model.nll_per_step(X_train, y_train))
        curves["valid"].append(model.nll_per_step(X_valid, y_valid))
        if best is None or curves["valid"][-1] < min(curves["valid"][:-1]):
            best, best_epoch = copy.deepcopy(model), epoch
        elif epoch - best_epoch >= patience:
            break
    return {
        "model": best,
        "curves": curves,
        "best_epoch": best_epoch,
        "cpu": time.process_time() - start,
        "train": curves["train"][best_epoch - 1],
        "valid": curves["valid"][best_epoch - 1],
        "test": best.nll_per_step(X_test, y_test),
    }


runs = {}
for hidden in (50, 100, 200):
    runs[f"{hidden} tanh, Adam"] = train(
        hidden_size=hidden, optimizer="adam", learning_rate=0.003, batch_size=8
    )
# The thesis' own comparison: the simplex direction against the clipped anti-gradient
# with the same step size mu = 0.2 and threshold tau = 3.
for optimizer in ("simplex", "sgd"):
    runs[f"100 tanh, {optimizer}"] = train(
        hidden_size=100, optimizer=optimizer, learning_rate=0.2, batch_size=8
    )

# %%
# Figure 4.3: training and validation NLL per step
# ------------------------------------------------
# Solid lines: training set; dashed: validation set; stars: the best validation
# epoch, whose model is kept. As in the thesis, the larger networks reach a lower
# training loss and start to overfit sooner.
fig, ax = plt.subplots(figsize=(8, 5))
for (name, run), color in zip(runs.items(), ["C0", "C1", "C2", "C3", "C4"]):
    epochs = np.arange(1, len(run["curves"]["train"]) + 1)
    ax.plot(epochs, run["curves"]["train"], color=color, label=f"{name}: train")
    ax.plot(epochs, run["curves"]["valid"], color=color, linestyle="--", label=f"{name}: validation")
    ax.plot(run["best_epoch"], run["valid"], marker="*", markersize=14, color=color)
for (name, scores), style in zip(baselines.items(), [":", "-."]):
    ax.axhline(scores["valid"], color="grey", linestyle=style, label=f"{name}: validation")
ax.set_xlabel("epoch")
ax.set_ylabel("NLL per step (nats)")
ax.set_ylim(top=max(b["valid"] for b in baselines.values()) + 1)
ax.legend(fontsize=7, ncol=2)
ax.set_title("Bach chorales: next-beat prediction")
fig.tight_layout()
plt.show()

# %%
# Tables 4.2 and 4.3: NLL per step of the best epoch
# --------------------------------------------------
print(f"{'model':>32} {'epoch':>6} {'train':>7} {'valid':>7} {'test':>7} {'CPU s':>7}")
for name, run in runs.items():
    print(f"{name:>32} {run['best_epoch']:>6} {run['train']:7.2f} {run['valid']:7.2f} "
          f"{run['test']:7.2f} {run['cpu']:7.0f}")
for name, scores in baselines.items():
    print(f"{name:>32} {'':>6} {scores['train']:7.2f} {scores['valid']:7.2f} {scores['test']:7.2f}")
best_rnn = min(run["test"] for run in runs.values())
best_baseline = min(scores["test"] for scores in baselines.values())
print(f"best RNN test NLL {best_rnn:.2f} against the best baseline's {best_baseline:.2f}")
