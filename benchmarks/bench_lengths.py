"""Heavy-tailed lengths: an estimator epoch against padding every batch, side by side.

20,000 sequences whose lengths are log-normal (median 20, sigma 1, clipped to 1..1,000,
the longest exactly 1,000), 6 features, a tanh network of 50 units, batches of 100,
clipped SGD. Three ways to run one epoch of the same network and updates:

- estimator: ``RNNRegressor(optimizer='sgd')``, whose batches group sequences of similar
  lengths (each batch padded to its own longest member); the epoch time is skorch's
  (the training loop, without the input validation that ``fit`` does once);
- padded to the longest: a plain PyTorch loop over random batches, every batch padded
  to the longest sequence of the data (1,000 steps), the same
  :class:`~sklearn_rnn.nn.RecurrentNetwork` reading each sequence at its last valid
  step. Every such batch has the same shape, so its epoch time is the median time of
  ``--padded-batches`` batches times the number of batches;
- padded per batch: the same loop, each random batch padded to its own longest member
  (what a ``DataLoader`` with a padding ``collate_fn`` does); every batch is timed.

Goal: the estimator at least 3x faster than padding to the longest.

Usage::

    python benchmarks/bench_lengths.py --threads 1          # 20,000 sequences, minutes
    python benchmarks/bench_lengths.py --quick              # 2,000 sequences, a check
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
import warnings

import numpy as np
import torch
import torch.nn.functional as F
from sklearn.exceptions import ConvergenceWarning

from sklearn_rnn import RNNRegressor
from sklearn_rnn.nn import RecurrentNetwork
from sklearn_rnn.optim import ClippedSGD

FEATURES, HIDDEN, BATCH, MEDIAN, SIGMA, LONGEST = 6, 50, 100, 20, 1.0, 1000


def heavy_tailed(n: int, seed: int = 0) -> tuple[list[np.ndarray], np.ndarray]:
    rng = np.random.default_rng(seed)
    lengths = np.clip(np.round(rng.lognormal(np.log(MEDIAN), SIGMA, size=n)), 1, LONGEST).astype(int)
    lengths[np.argmax(lengths)] = LONGEST
    X = [rng.normal(size=(length, FEATURES)).astype(np.float32) for length in lengths]
    y = np.array([x[:, 0].mean() for x in X])
    return X, y


def estimator_epoch(X: list[np.ndarray], y: np.ndarray, device: str) -> float:
    model = RNNRegressor(  # the settings measured before issue 17's defaults
        hidden_size=HIDDEN, cell="tanh", spectral_radius=1.2, early_stopping=False, frame=1,
        readout="last", conv_kernels=None,
        optimizer="sgd", batch_size=BATCH, max_iter=2, tol=0.0,
        device=device, random_state=0,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model.fit(X, y)
    return float(min(model.net_.history[:, "dur"]))  # the second epoch is warm


def padded_epoch(
    X: list[np.ndarray], y: np.ndarray, device: str, *, to_longest: bool, timed_batches: int | None
) -> float:
    network = RecurrentNetwork(FEATURES, HIDDEN, 1, generator=torch.Generator().manual_seed(0)).to(device)
    optimizer = ClippedSGD(network.parameters(), lr=0.01, clip_threshold=1.0)
    lengths = np.array([len(x) for x in X])
    targets = torch.as_tensor((y - y.mean()) / y.std(), dtype=torch.float32)[:, None]
    order = np.random.default_rng(0).permutation(len(X))
    batches = [order[i : i + BATCH] for i in range(0, len(X), BATCH)]
    times = []
    for rows in batches[: timed_batches or len(batches)]:
        start = time.perf_counter()
        steps = LONGEST if to_longest else int(lengths[rows].max())
        x = torch.zeros(len(rows), steps, FEATURES)  # (B, T, d), zero padding
        for i, row in enumerate(rows):
            x[i, : lengths[row]] = torch.from_numpy(X[row])
        x, batch_lengths = x.to(device), torch.as_tensor(lengths[rows], device=device)
        loss = F.mse_loss(network(x, batch_lengths), targets[rows].to(device))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if device == "cuda":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    if timed_batches:
        return statistics.median(times) * len(batches)
    return sum(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sequences", type=int, default=20_000)
    parser.add_argument("--padded-batches", type=int, default=20, help="batches timed when padding to the longest")
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--quick", action="store_true", help="2,000 sequences and 5 padded batches")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    n, timed = (2000, 5) if args.quick else (args.sequences, args.padded_batches)
    X, y = heavy_tailed(n)
    lengths = np.array([len(x) for x in X])
    estimator = estimator_epoch(X, y, args.device)
    longest = padded_epoch(X, y, args.device, to_longest=True, timed_batches=timed)
    per_batch = padded_epoch(X, y, args.device, to_longest=False, timed_batches=None)
    gpu = f", {torch.cuda.get_device_name()}" if args.device == "cuda" else ""
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"torch {torch.__version__}, {args.threads} threads{gpu}")
    print(f"{n} sequences, lengths median {np.median(lengths):.0f}, mean {lengths.mean():.1f}, "
          f"max {lengths.max()}; {FEATURES} features, {HIDDEN} tanh units, batch {BATCH}, sgd")
    print(f"epoch seconds: estimator {estimator:.2f}, padded to the longest {longest:.2f} "
          f"(median of {timed} batches x {-(-n // BATCH)}), padded per batch {per_batch:.2f}")
    print(f"ratio padded-to-longest / estimator: {longest / estimator:.1f} (goal >= 3)")
    print(f"ratio padded-per-batch / estimator: {per_batch / estimator:.1f}")


if __name__ == "__main__":
    main()
