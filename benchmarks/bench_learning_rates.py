"""How the learning rate and the switching threshold of 'sgd' and 'simplex' fare out of the box.

The estimators' step rule for ``optimizer='sgd'`` and ``'simplex'`` is the thesis' clipped
step (eq. 3.6): a step of ``learning_rate`` times the direction, shortened to
``learning_rate * clip_threshold`` when the direction is longer than ``clip_threshold``.
This script fits the estimators with their defaults (``fit``: batches of 32, up to
``--max-iter`` epochs, stopping when the training loss stops improving) on two small
long-memory tasks, for a grid of learning rates and switching thresholds, several seeds,
and prints the test error (:func:`sklearn_rnn.datasets.task_error`: wrong class for
temporal order, ``|error| >= 0.04`` for addition) and the fit time of each setting.

Usage: ``python benchmarks/bench_learning_rates.py [--length 20] [--n-train 2000]
[--seeds 0 1 2] [--learning-rates 0.01 0.02 0.05 0.1] [--switch-thresholds -1 0.9]
[--max-iter 50] [--threads 1]``. A negative switching threshold means None (never switch).
Prints one line per setting (mean over seeds, and each seed's error).
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
import torch
from sklearn.exceptions import ConvergenceWarning

from sklearn_rnn import RNNClassifier, RNNRegressor
from sklearn_rnn.datasets import make_addition, make_temporal_order, task_error

TASKS = {
    "temporal_order": (make_temporal_order, RNNClassifier),
    "addition": (make_addition, RNNRegressor),
}


def fit_error(task: str, optimizer: str, learning_rate: float, switch_threshold: float | None,
              seed: int, length: int, n_train: int, max_iter: int) -> tuple[float, float, int]:
    """Fit one estimator on fresh data of ``task``; return test error, seconds, epochs."""
    make, estimator = TASKS[task]
    X, y = make(n_train, length, random_state=seed)
    X_test, y_test = make(2000, length, random_state=10_000 + seed)
    # The settings the runs of the method page were measured with (the defaults before
    # issue 17): the 'tanh' cell at radius 1.2, stopping on the training loss, no
    # convolutional stage, the last state read, no label smoothing (which 'auto' now
    # gives sequences of 18 steps or more and classifiers).
    params = {"optimizer": optimizer, "learning_rate": learning_rate, "max_iter": max_iter,
              "random_state": seed, "cell": "tanh", "spectral_radius": 1.2,
              "early_stopping": False, "frame": 1, "conv_kernels": None, "readout": "last"}
    if task == "temporal_order":
        params["label_smoothing"] = 0.0
    if optimizer == "simplex":
        params["switch_threshold"] = switch_threshold
    model = estimator(**params)
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model.fit(X, y)
    seconds = time.perf_counter() - start
    predicted = model.predict_proba(X_test) if task == "temporal_order" else model.predict(X_test)
    return task_error(task, y_test, predicted), seconds, model.n_iter_


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tasks", nargs="+", default=list(TASKS), choices=list(TASKS))
    parser.add_argument("--length", type=int, default=20)
    parser.add_argument("--n-train", type=int, default=2000)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--optimizers", nargs="+", default=["sgd", "simplex"],
                        choices=["adam", "sgd", "simplex"])
    parser.add_argument("--learning-rates", type=float, nargs="+",
                        default=[0.01, 0.02, 0.05, 0.1])
    parser.add_argument("--switch-thresholds", type=float, nargs="+", default=[-1.0, 0.9],
                        help="psi values for 'simplex'; a negative value means None")
    parser.add_argument("--max-iter", type=int, default=50)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(f"length {args.length}, {args.n_train} training sequences, max_iter {args.max_iter}, "
          f"seeds {args.seeds}, torch {torch.__version__}, {args.threads} thread(s)")
    for task in args.tasks:
        for optimizer in args.optimizers:
            thresholds = args.switch_thresholds if optimizer == "simplex" else [-1.0]
            for psi in thresholds:
                switch = None if psi < 0 else psi
                for learning_rate in args.learning_rates:
                    runs = [fit_error(task, optimizer, learning_rate, switch, seed, args.length,
                                      args.n_train, args.max_iter) for seed in args.seeds]
                    errors = [error for error, _, _ in runs]
                    label = f"simplex psi={switch}" if optimizer == "simplex" else optimizer
                    print(f"{task:15s} {label:18s} lr {learning_rate:<5} mean error "
                          f"{np.mean(errors):.3f} (seeds: "
                          f"{' '.join(f'{e:.3f}' for e in errors)}), epochs "
                          f"{' '.join(str(n) for _, _, n in runs)}, "
                          f"{np.mean([s for _, s, _ in runs]):.1f} s per fit", flush=True)


if __name__ == "__main__":
    main()
