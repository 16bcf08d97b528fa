"""Temporal order at length 50: the simplex method against clipped SGD, through the estimator.

Settings of the reference run (a small implementation outside the package solved this
task in 13,000 updates, while clipped SGD stayed at chance after 34,000): 50 tanh units,
spectral radius 1.2, learning rate 0.01, clipping threshold 1, switching threshold 0.9,
batches of 100 fresh sequences per update (``partial_fit``), success when the error on
10,000 validation sequences drawn once is below 1%, checked every 200 updates.

Usage: ``python benchmarks/bench_temporal_order.py [--length 50] [--max-updates 34000]
[--seeds 0] [--optimizers simplex sgd]``. Prints one line per run.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from sklearn_rnn import RNNClassifier
from sklearn_rnn.datasets import make_temporal_order, task_error


def run(optimizer: str, length: int, seed: int, max_updates: int, check_every: int,
        learning_rate: float = 0.01, switch_threshold: float | None = 0.9,
        verbose: bool = False) -> dict:
    model = RNNClassifier(
        hidden_size=50, spectral_radius=1.2, optimizer=optimizer, learning_rate=learning_rate,
        clip_threshold=1.0, switch_threshold=switch_threshold, batch_size=100, random_state=seed,
    )
    X_valid, y_valid = make_temporal_order(10_000, length, random_state=10_000 + seed)
    stream = np.random.default_rng(seed)
    classes = np.arange(4)
    start, error, updates = time.perf_counter(), 1.0, 0
    while updates < max_updates:
        X, y = make_temporal_order(100, length, random_state=stream)
        model.partial_fit(X, y, classes=classes)
        updates += 1
        if updates % check_every == 0:
            error = task_error("temporal_order", y_valid, model.predict_proba(X_valid))
            if verbose:
                counts = getattr(model.net_.optimizer_, "branch_counts", "")
                print(f"  {optimizer} seed {seed} update {updates}: error {error:.4f} "
                      f"loss {model.loss_curve_[-1]:.4f} {counts}", flush=True)
            if error < 0.01:
                break
    return {"optimizer": optimizer, "seed": seed, "updates": updates, "error": error,
            "seconds": time.perf_counter() - start, "solved": error < 0.01}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--length", type=int, default=50)
    parser.add_argument("--max-updates", type=int, default=34_000)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--optimizers", nargs="+", default=["simplex", "sgd"])
    parser.add_argument("--check-every", type=int, default=200)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--learning-rate", type=float, default=0.01)
    parser.add_argument("--switch-threshold", type=float, default=0.9,
                        help="psi; a negative value means None (never switch)")
    parser.add_argument("--verbose", action="store_true", help="print every validation check")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(f"temporal order, length {args.length}, lr {args.learning_rate}, psi "
          f"{args.switch_threshold}, torch {torch.__version__}, {args.threads} threads")
    for seed in args.seeds:
        for optimizer in args.optimizers:
            psi = None if args.switch_threshold < 0 else args.switch_threshold
            r = run(optimizer, args.length, seed, args.max_updates, args.check_every,
                    args.learning_rate, psi, args.verbose)
            print(f"{r['optimizer']:8s} seed {r['seed']}: {'solved' if r['solved'] else 'NOT solved'} "
                  f"after {r['updates']} updates, validation error {r['error']:.4f}, "
                  f"{r['seconds']:.0f} s", flush=True)


if __name__ == "__main__":
    main()
