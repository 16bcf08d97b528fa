"""
=================================================
Training history, early stopping and optimizers
=================================================

Every fitted estimator keeps its history: the training loss of each epoch in
``loss_curve_`` and, with ``early_stopping=True``, the score on the held-out
validation share in ``validation_scores_``.
:func:`~sklearn_rnn.plotting.plot_training_history` draws both, and marks the epoch
whose weights the estimator kept.

Here three optimizers train one network on the same long-memory task: Adam with
clipped gradients (the default), the thesis' clipped anti-gradient (``'sgd'``) and its
simplex method (``'simplex'``), all from the same spectral initialization (see
:ref:`method`). The network is the thesis' one, pinned for all three: 'auto' settings
resolve by optimizer (with 'adam' and 'sgd' the defaults train a GRU whose readout
pools its states, see :ref:`defaults`), which would compare networks, not optimizers.
"""

# %%
# The task and the three estimators
# ---------------------------------
# The temporal order task: a class given by two symbols near the start of each
# sequence, followed by distractors (see :ref:`synthetic_tasks`).
import os
import warnings

import matplotlib.pyplot as plt
from sklearn.exceptions import ConvergenceWarning

from sklearn_rnn import RNNClassifier
from sklearn_rnn.datasets import make_temporal_order, task_error
from sklearn_rnn.plotting import plot_training_history

QUICK = os.environ.get("SKLEARN_RNN_QUICK") == "1"
n_train, length, max_iter = (400, 10, 25) if QUICK else (2000, 20, 100)

X, y = make_temporal_order(n_train, length, variable_length=True, random_state=0)
X_test, y_test = make_temporal_order(1000, length, variable_length=True, random_state=1)

# The thesis' network for all three: 32 tanh units initialized at spectral radius 1.2,
# read at the last step of the raw inputs; one stopping tolerance.
network = {"cell": "tanh", "spectral_radius": 1.2, "readout": "last", "conv_kernels": None,
           "frame": 1, "instance_norm": False, "tol": 1e-4}
settings = {
    "adam": {"optimizer": "adam", "learning_rate": 0.005},
    "sgd": {"optimizer": "sgd", "learning_rate": 0.05},
    "simplex": {"optimizer": "simplex", "learning_rate": 0.05, "switch_threshold": 0.9},
}
models = {}
for name, params in settings.items():
    model = RNNClassifier(
        hidden_size=32,
        max_iter=max_iter,
        early_stopping=True,
        validation_fraction=0.2,
        n_iter_no_change=15,
        label_smoothing=0.0,  # one loss for the three (the simplex method takes no smoothing)
        random_state=0,
        **network,
        **params,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # short runs in quick mode
        models[name] = model.fit(X, y)
    error = task_error("temporal_order", y_test, model.predict_proba(X_test))
    print(f"{name:>8}: {model.n_iter_} epochs, test error {error:.1%}")

# %%
# The histories
# -------------
# The blue line is the training loss (left axis), the orange one the validation
# accuracy (right axis); the star marks the epoch restored at the end.
fig, axes = plt.subplots(3, 1, figsize=(7, 10), sharex=True)
for ax, (name, model) in zip(axes, models.items()):
    plot_training_history(model, ax=ax)
    ax.set_title(f"optimizer={name!r}")
fig.tight_layout()
plt.show()

# %%
# Progress while it trains
# ------------------------
# With ``verbose=1`` an estimator prints one line per epoch and shows a progress bar
# of the running epoch's batches:
#
# .. code-block:: python
#
#    RNNClassifier(verbose=1, early_stopping=True).fit(X, y)
#
# With the default ``verbose=0`` it prints nothing.
