"""Time per update, side by side in one run: plain PyTorch, the estimator, the simplex method.

All train the same Elman network shape (6 features, 50 tanh units, linear readout at the
last step, squared error) on batches of 100 sequences of length 100:

- plain: ``nn.RNN`` + ``nn.Linear`` with the clipped anti-gradient step (eq. 3.6), batches
  ready-made;
- estimator, sgd: ``RNNRegressor(optimizer='sgd')``, everything ``fit`` does per update
  (batch assembly, skorch's callbacks and history);
- estimator, simplex: ``RNNRegressor(optimizer='simplex')`` with no switching, so every
  update computes the temporal gradients and the simplex direction (its costliest case).

Runs alternate and the medians are compared. Goals: estimator/plain <= 1.3 (CPU);
simplex/sgd <= 1.25 (CPU), <= 1.3 (GPU, at batch 100, length 1000, 256 hidden).

Usage: ``python benchmarks/bench_update_cost.py [--threads 2] [--repeats 5]``
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time
import warnings

import numpy as np
import torch
from sklearn.exceptions import ConvergenceWarning

from sklearn_rnn import RNNRegressor
from sklearn_rnn.optim import ClippedSGD

BATCH, LENGTH, FEATURES, HIDDEN, BATCHES_PER_EPOCH, EPOCHS = 100, 100, 6, 50, 10, 3


def data(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(BATCH * BATCHES_PER_EPOCH, LENGTH, FEATURES))
    return X, X[:, -5:, 0].sum(axis=1)


def estimator_seconds_per_update(X: np.ndarray, y: np.ndarray, optimizer: str) -> float:
    model = RNNRegressor(
        hidden_size=HIDDEN, optimizer=optimizer, learning_rate=0.01, batch_size=BATCH,
        max_iter=EPOCHS, tol=0.0, device="cpu", random_state=0,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        start = time.perf_counter()
        model.fit(X, y)
        elapsed = time.perf_counter() - start
    return elapsed / (EPOCHS * BATCHES_PER_EPOCH)


def plain_seconds_per_update(X: np.ndarray, y: np.ndarray) -> float:
    torch.manual_seed(0)  # benchmark script, not library code
    rnn = torch.nn.RNN(FEATURES, HIDDEN, batch_first=True)
    readout = torch.nn.Linear(HIDDEN, 1)
    params = [*rnn.parameters(), *readout.parameters()]
    optimizer = ClippedSGD(params, lr=0.01, clip_threshold=1.0)
    inputs = torch.as_tensor(X, dtype=torch.float32)
    targets = torch.as_tensor((y - y.mean()) / y.std(), dtype=torch.float32)[:, None]
    start = time.perf_counter()
    for _ in range(EPOCHS):
        for batch in torch.randperm(len(inputs)).split(BATCH):
            hidden, _ = rnn(inputs[batch])
            loss = torch.nn.functional.mse_loss(readout(hidden[:, -1]), targets[batch])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    return (time.perf_counter() - start) / (EPOCHS * BATCHES_PER_EPOCH)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    X, y = data()
    plain_seconds_per_update(X, y)  # warm-ups: first calls pay for lazy imports
    estimator_seconds_per_update(X, y, "simplex")
    times: dict[str, list[float]] = {"plain": [], "sgd": [], "simplex": []}
    for _ in range(args.repeats):
        times["plain"].append(plain_seconds_per_update(X, y))
        times["sgd"].append(estimator_seconds_per_update(X, y, "sgd"))
        times["simplex"].append(estimator_seconds_per_update(X, y, "simplex"))
    ms = {name: 1e3 * statistics.median(values) for name, values in times.items()}
    print(f"machine: {platform.processor() or platform.machine()}, torch {torch.__version__}, "
          f"{args.threads} threads, {args.repeats} repeats")
    print(f"batch {BATCH}, length {LENGTH}, {FEATURES} features, {HIDDEN} hidden")
    print("ms/update: " + ", ".join(f"{name} {value:.2f}" for name, value in ms.items()))
    print(f"ratio estimator(sgd) / plain: {ms['sgd'] / ms['plain']:.2f} (goal <= 1.3)")
    print(f"ratio simplex / sgd (same estimator): {ms['simplex'] / ms['sgd']:.2f} (goal <= 1.25)")


if __name__ == "__main__":
    main()
