"""Where the first updates take the recurrent matrix: its spectral radius after a few hundred updates.

On temporal order at length 50 with the reference settings (50 tanh units, spectral
radius 1.2 at initialization, clipping threshold 1, batches of 100 fresh sequences), some
runs stay at chance (loss ln 4) for tens of thousands of updates while others leave it
within a few thousand. This script asks whether the early state of the network tells
them apart: for each seed and optimizer it prints the recurrent matrix's spectral
radius, the temporal-gradient norms of the first and last steps and the mean loss of
the last 50 updates after ``--updates`` updates, on the same data stream as
``bench_temporal_order.py`` (seed ``s`` for the initialization and the stream). The
answer recorded in the documentation (user guide, "Measured: the reference task
through the estimator") is no: the radius grows to 1.3-1.55 in runs that later succeed
as well as in runs that stay at chance.

Usage: ``python -m experiments.bench_early_radius [--seeds 0 1 2 3 4 5] [--updates 400]
[--learning-rate 0.05] [--switch-threshold 0.9] [--optimizers sgd simplex]``.
"""

from __future__ import annotations

import argparse

import numpy as np

from experiments._stream import (
    RunSpec,
    finite_float,
    make_estimator,
    nonnegative_int,
    positive_float,
    positive_int,
    recurrent_radius,
    set_threads,
)

from sklearn_rnn.datasets import make_temporal_order
from sklearn_rnn.diagnostics import temporal_gradient_norms


def early_state(optimizer: str, seed: int, updates: int, learning_rate: float,
                switch_threshold: float | None, length: int) -> tuple[float, float, float, float]:
    """Spectral radius, first- and last-step gradient norms and loss after ``updates``."""
    spec = RunSpec("temporal_order", length, optimizer, seed, learning_rate=learning_rate,
                   switch_threshold=switch_threshold if optimizer == "simplex" else None,
                   spectral_radius=1.2)
    model = make_estimator(spec)
    stream = np.random.default_rng(seed)
    for _ in range(updates):
        X, y = make_temporal_order(spec.batch_size, length, random_state=stream)
        model.partial_fit(X, y, classes=np.arange(4))
    X_probe, y_probe = make_temporal_order(100, length, random_state=12_345)
    norms = temporal_gradient_norms(model, X_probe, y_probe).norms
    loss = float(np.mean(model.loss_curve_[-50:]))
    return recurrent_radius(model), float(norms[0]), float(norms[-1]), loss


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seeds", type=nonnegative_int, nargs="+", default=[0, 1, 2, 3, 4, 5])
    parser.add_argument("--updates", type=positive_int, default=400)
    parser.add_argument("--length", type=positive_int, default=50)
    parser.add_argument("--learning-rate", type=positive_float, default=0.05)
    parser.add_argument("--switch-threshold", type=finite_float, default=0.9,
                        help="psi of the simplex method; a negative value means None")
    parser.add_argument("--optimizers", nargs="+", default=["sgd", "simplex"], choices=["sgd", "simplex"])
    parser.add_argument("--threads", type=positive_int, default=1)
    args = parser.parse_args()
    set_threads(args.threads)
    psi = None if args.switch_threshold < 0 else args.switch_threshold
    print(f"temporal order, length {args.length}, lr {args.learning_rate}, psi {psi}, "
          f"after {args.updates} updates")
    for seed in args.seeds:
        for optimizer in args.optimizers:
            radius, first, last, loss = early_state(optimizer, seed, args.updates,
                                                    args.learning_rate, psi, args.length)
            print(f"seed {seed} {optimizer:8s} radius {radius:.2f}  step-1 norm {first:.2e}  "
                  f"last-step norm {last:.2e}  loss (last 50) {loss:.3f}", flush=True)


if __name__ == "__main__":
    main()
