"""Threads by default: the README's "Ten lines" snippet at the package's default against
one thread and against torch's own setting, side by side in one run.

The snippet is a 3-fold ``cross_val_score`` of the defaults,
``make_pipeline(SequenceStandardScaler(), RNNClassifier(random_state=0))``, on 200
sequences of 3-29 steps (3 fits; ``--quick`` caps them at 5 epochs). Three ways, each
repeated ``--repeats`` times in turn (so that a load change hits them alike), best time
kept:

- ``default``: torch at its own thread count (all cores), the package's default rule
  (one intra-op thread for a small network, see ``sklearn_rnn._parallel.SMALL_WORK``);
- ``one thread``: ``torch.set_num_threads(1)``, what the README advised before;
- ``torch's setting``: inside ``torch_threads(None)``, every core, as before the rule.

The goal: ``default`` within 1.3 times ``one thread``.

A second table runs fits of growing networks (``--sizes``) at one thread and at torch's
setting, for the threshold ``SMALL_WORK``.

Usage::

    python benchmarks/bench_threads.py               # the snippet, 3 repeats, and the sizes
    python benchmarks/bench_threads.py --quick       # max_iter=5, 1 repeat, no sizes
"""

from __future__ import annotations

import argparse
import os
import platform
import time
import warnings

import numpy as np
import torch
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import cross_val_score
from sklearn.pipeline import make_pipeline

from sklearn_rnn import RNNClassifier, SequenceStandardScaler, torch_threads


def snippet(max_iter: int) -> float:
    """The README's "Ten lines" (its model, data and cross-validation), timed."""
    rng = np.random.default_rng(0)
    X = [rng.normal(size=(rng.integers(3, 30), 4)) for _ in range(200)]
    y = np.array([int(x[:, 0].sum() > 0) for x in X])
    model = make_pipeline(
        SequenceStandardScaler(), RNNClassifier(max_iter=max_iter, random_state=0)
    )
    start = time.perf_counter()
    cross_val_score(model, X, y, scoring="roc_auc", cv=3)
    return time.perf_counter() - start


def sized_fit(hidden: int, batch: int) -> float:
    rng = np.random.default_rng(0)
    X = [rng.normal(size=(50, 8)) for _ in range(2 * batch)]
    y = np.array([int(x[:, 0].sum() > 0) for x in X])
    start = time.perf_counter()
    RNNClassifier(hidden_size=hidden, batch_size=batch, max_iter=3, random_state=0).fit(X, y)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--sizes", default="50x32,128x128,256x256,512x256")
    args = parser.parse_args()
    max_iter, repeats = (5, 1) if args.quick else (RNNClassifier().max_iter, args.repeats)
    cores = os.cpu_count() or 1
    all_threads = torch.get_num_threads()
    print(f"{platform.processor() or platform.machine()}, {cores} cores, torch {torch.__version__}, "
          f"torch's thread count {all_threads}, load average {os.getloadavg()[0]:.2f}")
    warnings.simplefilter("ignore", ConvergenceWarning)
    snippet(1)  # warm-up: torch's first fit pays for lazy initialization at any thread count
    times: dict[str, list[float]] = {"default": [], "one thread": [], "torch's setting": []}
    for _ in range(repeats):
        torch.set_num_threads(all_threads)
        times["default"].append(snippet(max_iter))
        torch.set_num_threads(1)
        times["one thread"].append(snippet(max_iter))
        torch.set_num_threads(all_threads)
        with torch_threads(None):
            times["torch's setting"].append(snippet(max_iter))
    best = {name: min(values) for name, values in times.items()}
    print(f"\nREADME snippet (cross_val_score, 3 fits, max_iter={max_iter}), best of {repeats}:")
    for name, seconds in best.items():
        print(f"  {name:<16} {seconds:7.2f} s   {seconds / best['one thread']:5.2f} x one thread")
    if args.quick:
        return
    print(f"\nOne fit of 3 epochs, 2 batches of 50 steps, 8 features ({all_threads} threads "
          "against 1):")
    print(f"  {'hidden x batch':<16} {'1 thread':>9} {f'{all_threads} threads':>10} {'ratio':>6}")
    for size in args.sizes.split(","):
        hidden, batch = (int(part) for part in size.split("x"))
        with torch_threads(1):
            one = sized_fit(hidden, batch)
        with torch_threads(all_threads):
            many = sized_fit(hidden, batch)
        print(f"  {size:<16} {one:8.2f}s {many:9.2f}s {many / one:6.2f}")


if __name__ == "__main__":
    main()
