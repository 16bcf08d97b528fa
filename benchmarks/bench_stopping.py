"""Stopping rules and weight averaging replayed on recorded training runs.

A stopping rule that watches a loss and restores the best epoch does not change the
epochs before it stops: the weights, the shuffles and the losses of epoch ``k`` are the
same whether training goes on to 200 epochs or ends at ``k``. So one fit per set and
seed that runs ``--epochs`` epochs without stopping, keeping every epoch's weights,
answers for every rule of that kind what it would have kept: this script fits
:class:`~sklearn_rnn.RNNClassifier` at its defaults (only ``random_state`` set;
``max_iter=--epochs`` and a patience that never runs out), scores the test set with
every epoch's weights, and replays

- the estimator's rule (skorch's early stopping with an absolute ``tol``, a warm-up of
  ``3 * n_iter_no_change`` epochs without misses, the best epoch restored) at several
  ``tol``, ``n_iter_no_change`` and ``max_iter`` (the monitored loss is the validation
  loss where 'auto' holds out, the training loss below that);
- the best epoch chosen by the held-out accuracy instead of the loss (ties to the
  earlier epoch, or to the lower validation loss);
- averaged weights: the mean of the weights of the 5 epochs ending at the kept epoch
  (``mean5``), or their exponential moving average with a factor of 0.8 per epoch
  (``ema0.8``), instead of the kept epoch's own weights;

and prints, per rule and set, the mean test accuracy over the seeds and the epochs each
seed ran (fit time is about proportional to the epochs; each set's line also gives the
seconds per epoch). ``oracle`` is the best test accuracy any epoch reached (an upper
bound on what choosing the epoch can give, not a rule). The replay of the defaults'
rule reproduces the defaults' fits (``--verify`` fits them and compares: stop epoch and
accuracy).

Usage (from the repository root, aeon from the ``bench`` extra)::

    PYTHONPATH=. /work/venv-bench/bin/python benchmarks/bench_stopping.py \\
        [--datasets JapaneseVowels Pickup ...] [--seeds 0 1 2 3 4] [--verify]
"""

from __future__ import annotations

import argparse
import copy
import os
import sys
import time
import warnings
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402
from skorch.callbacks import Callback  # noqa: E402

# The script's folder is first on the import path when it runs as a script.
from bench_defaults import DATASETS, _standardize, _subsample  # noqa: E402

from sklearn_rnn import RNNClassifier  # noqa: E402

torch.set_num_threads(1)

SHORT_SETS = ["JapaneseVowels", "PickupGestureWiimoteZ", "BasicMotions (cut)", "GunPoint (cut)",
              "ItalyPowerDemand (cut)", "ArrowHead (cut)"]

#: name -> (n_iter_no_change, tol, max_iter) of the estimator's rule; warm-up 3 * patience.
RULES: dict[str, tuple[int, float, int]] = {
    "defaults (10, 1e-4, 200)": (10, 1e-4, 200),
    "max_iter 100": (10, 1e-4, 100),
    "max_iter 60": (10, 1e-4, 60),
    "tol 1e-3": (10, 1e-3, 200),
    "tol 3e-3": (10, 3e-3, 200),
    "tol 1e-2": (10, 1e-2, 200),
    "patience 5": (5, 1e-4, 200),
    "patience 5, tol 1e-3": (5, 1e-3, 200),
    "tol 3e-3, max_iter 70": (10, 3e-3, 70),
    "tol 1e-3, max_iter 60": (10, 1e-3, 60),
    "tol 3e-3, max_iter 60": (10, 3e-3, 60),
    "tol 1e-2, max_iter 60": (10, 1e-2, 60),
}
AVERAGES = ("kept epoch", "mean5", "ema0.8")


class _EveryEpoch(Callback):
    """Keeps a copy of the module's weights and the elapsed seconds at every epoch's end."""

    def on_train_begin(self, net: Any, **kwargs: Any) -> None:
        self.states: list[dict[str, torch.Tensor]] = []
        self.seconds: list[float] = []
        self._start = time.perf_counter()
        self._copying = 0.0

    def on_epoch_end(self, net: Any, **kwargs: Any) -> None:
        now = time.perf_counter()
        self.seconds.append(now - self._start - self._copying)
        self.states.append(copy.deepcopy(net.module_.state_dict()))
        self._copying += time.perf_counter() - now


def replay(curve: np.ndarray, patience: int, tol: float, max_iter: int) -> tuple[int, int]:
    """(epochs run, kept epoch index) of the estimator's rule on a monitored loss curve:
    skorch's early stopping with an absolute threshold (an epoch improves when its loss is
    below the best so far minus ``tol``), no misses counted during the first
    ``3 * patience`` epochs, the last improving epoch kept."""
    threshold, best, misses = np.inf, 0, 0
    warm_up = 3 * patience
    for epoch in range(min(max_iter, len(curve))):
        if curve[epoch] < threshold:
            threshold, best, misses = curve[epoch] - tol, epoch, 0
        else:
            misses += 1
        if epoch + 1 <= warm_up:
            misses = 0
        elif misses >= patience:
            return epoch + 1, best
    return min(max_iter, len(curve)), best


def by_score(scores: np.ndarray, losses: np.ndarray, ties: str, max_iter: int = 60) -> int:
    """Kept epoch index when the held-out accuracy chooses (ties: 'first' or 'loss')."""
    best = 0
    for epoch in range(1, min(max_iter, len(scores))):
        if scores[epoch] > scores[best] or (
            ties == "loss" and scores[epoch] == scores[best] and losses[epoch] < losses[best]
        ):
            best = epoch
    return best


def record(name: str, seed: int, epochs: int, max_test: int) -> dict[str, Any]:
    """One fit of ``epochs`` epochs without stopping; every epoch's test accuracy and a
    scorer of averaged weights."""
    split = DATASETS[name][0](seed)
    split = (*split[:2], *_subsample(split, max_test, seed)[2:])
    X, y, X_test, y_test = _standardize(split)
    keeper = _EveryEpoch()
    clf = RNNClassifier(random_state=seed, max_iter=epochs, n_iter_no_change=epochs,
                        callbacks=[("every_epoch", keeper)])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        clf.fit(X, y)
    kept = dict(clf.net_.callbacks_)["every_epoch"]  # the fitted copy
    history = clf.net_.history
    held_out = clf.validation_scores_ is not None
    key = "valid_loss" if held_out else (
        "train_objective" if "train_objective" in history[-1] else "train_loss")
    states = kept.states

    def accuracy(weights: dict[int, float]) -> float:
        averaged = {
            k: sum(w * states[i][k].double() for i, w in weights.items()).to(states[0][k].dtype)
            for k in states[0]
        }
        clf.module_.load_state_dict(averaged)
        return float(np.mean(clf.predict(X_test) == y_test))

    per_epoch = np.array([accuracy({i: 1.0}) for i in range(len(states))])
    return {
        "curve": np.array(history[:, key], dtype=float),
        "valid_loss": np.array(history[:, "valid_loss"], dtype=float) if held_out else None,
        "valid_score": np.array(clf.validation_scores_) if held_out else None,
        "accuracy": per_epoch, "score_weights": accuracy,
        "seconds_per_epoch": kept.seconds[-1] / len(kept.seconds), "monitor": key,
    }


def averaged(run: dict[str, Any], kept: int, how: str) -> float:
    if how == "kept epoch":
        return float(run["accuracy"][kept])
    if how == "mean5":
        window = range(max(0, kept - 4), kept + 1)
        return run["score_weights"]({i: 1.0 / len(window) for i in window})
    factor = 0.8  # ema0.8
    weights = np.array([factor ** (kept - i) for i in range(kept + 1)])
    weights /= weights.sum()
    return run["score_weights"](dict(enumerate(weights)))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--datasets", nargs="+", default=SHORT_SETS)
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2, 3, 4])
    parser.add_argument("--epochs", type=int, default=200)
    parser.add_argument("--max-test", type=int, default=300)
    parser.add_argument("--verify", action="store_true",
                        help="also fit the defaults and compare with the replay of their rule")
    args = parser.parse_args(argv)
    selected = [n for n in DATASETS if any(s.lower() in n.lower() for s in args.datasets)]
    print(f"torch {torch.__version__}, 1 thread, seeds {args.seeds}, load "
          f"{os.getloadavg()[0]:.2f}", flush=True)
    for name in selected:
        runs = {seed: record(name, seed, args.epochs, args.max_test) for seed in args.seeds}
        first = runs[args.seeds[0]]
        print(f"{name} (monitored: {first['monitor']}; {first['seconds_per_epoch']:.4f} s per "
              f"epoch at seed {args.seeds[0]})", flush=True)
        oracle = [float(run["accuracy"].max()) for run in runs.values()]
        print(f"  {'oracle (best epoch in hindsight)':34s} {np.mean(oracle):.4f}  "
              f"[{' '.join(f'{a:.3f}' for a in oracle)}]", flush=True)
        for rule, (patience, tol, max_iter) in RULES.items():
            stops = {s: replay(run["curve"], patience, tol, max_iter) for s, run in runs.items()}
            parts = []
            for how in AVERAGES:
                accs = [averaged(runs[s], stops[s][1], how) for s in args.seeds]
                parts.append(f"{how} {np.mean(accs):.4f}")
                if how == "kept epoch":
                    each = " ".join(f"{a:.3f}" for a in accs)
            epochs = ",".join(str(stops[s][0]) for s in args.seeds)
            print(f"  {rule:34s} {' | '.join(parts)}  epochs [{epochs}]  kept-epoch accuracy "
                  f"[{each}]", flush=True)
        if first["valid_score"] is not None:
            for ties in ("first", "loss"):
                accs = [float(run["accuracy"][by_score(run["valid_score"], run["valid_loss"], ties)])
                        for run in runs.values()]
                print(f"  {'held-out accuracy, ties ' + ties + ', 60':34s} kept epoch "
                      f"{np.mean(accs):.4f}  [{' '.join(f'{a:.3f}' for a in accs)}]", flush=True)
        if args.verify:
            for seed, run in runs.items():
                split = DATASETS[name][0](seed)
                split = (*split[:2], *_subsample(split, args.max_test, seed)[2:])
                X, y, X_test, y_test = _standardize(split)
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    clf = RNNClassifier(random_state=seed).fit(X, y)
                stop, kept = replay(run["curve"], 10, 1e-4, 200)
                print(f"  verify seed {seed}: fit {clf.n_iter_} epochs, accuracy "
                      f"{clf.score(X_test, y_test):.3f}; replay {stop} epochs, accuracy "
                      f"{run['accuracy'][kept]:.3f}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
