"""Time per update: the estimator against a plain PyTorch loop, side by side in one run.

Both train the same Elman network shape (6 features, 50 tanh units, linear readout at the
last step, squared error) with the clipped anti-gradient step of eq. 3.6 on batches of
100 sequences of length 100. The estimator's time includes everything ``fit`` does per
update (batch assembly, skorch's callbacks and history); the plain loop gets its batches
ready-made. Runs alternate A, B, A, B and the medians are compared.

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


def estimator_seconds_per_update(X: np.ndarray, y: np.ndarray) -> float:
    model = RNNRegressor(
        hidden_size=HIDDEN, optimizer="sgd", learning_rate=0.01, batch_size=BATCH,
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
    plain_seconds_per_update(X, y)  # warm-up
    ours, plain = [], []
    for _ in range(args.repeats):
        ours.append(estimator_seconds_per_update(X, y))
        plain.append(plain_seconds_per_update(X, y))
    ours_ms, plain_ms = 1e3 * statistics.median(ours), 1e3 * statistics.median(plain)
    print(f"machine: {platform.processor() or platform.machine()}, torch {torch.__version__}, "
          f"{args.threads} threads")
    print(f"batch {BATCH}, length {LENGTH}, {FEATURES} features, {HIDDEN} hidden, clipped SGD")
    print(f"estimator: {ours_ms:.2f} ms/update   plain PyTorch: {plain_ms:.2f} ms/update")
    print(f"ratio estimator / plain: {ours_ms / plain_ms:.2f} (goal <= 1.3)")


if __name__ == "__main__":
    main()
