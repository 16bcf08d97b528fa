"""Where an estimator's update waits for the GPU: every synchronizing CUDA call, by line.

A synchronizing call (a value read on the host, a copy from ordinary host memory)
makes the host wait until the device has run everything queued; the device then idles
until the host queues the next kernels. PyTorch's sync debug mode warns at each such
call; this script counts the warnings by the Python line that made them, during fits
of ``RNNRegressor`` at the GPU shape of ``bench_update_cost.py`` (batches of 100
sequences of 1,000 steps, 6 features, 256 units), with clipped SGD and with the simplex
method. A fit of one batch is subtracted from a fit of ``--batches`` batches, so that
what ``fit`` does once (the data's copy to the device, the checks) drops out and the
table shows the waits per update.

Usage (needs a CUDA device)::

    python benchmarks/bench_sync_points.py --cell tanh
"""

from __future__ import annotations

import argparse
import collections
import os
import warnings
from collections.abc import Callable
from typing import TypeVar

import numpy as np
import torch

from sklearn_rnn import RNNRegressor

FEATURES, BATCH, LENGTH, HIDDEN = 6, 100, 1000, 256
T = TypeVar("T")


def synchronizations(action: Callable[[], T]) -> tuple[list[str], T]:
    """The synchronizing CUDA calls that ``action()`` makes, each as the ``file:line``
    that made it (PyTorch's sync debug mode warns at each), and ``action()``'s result."""
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("warn")
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            result = action()
    finally:
        torch.cuda.set_sync_debug_mode("default")
    found = [f"{os.path.relpath(w.filename)}:{w.lineno}" for w in caught if "synchroniz" in str(w.message)]
    return found, result


def waits_during_fit(cell: str, optimizer: str, batches: int) -> collections.Counter[str]:
    """Synchronizing calls made during one fit on ``batches`` batches, by ``file:line``."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(BATCH * batches, LENGTH, FEATURES)).astype(np.float32)
    y = X[:, -5:, 0].sum(axis=1)
    model = RNNRegressor(
        hidden_size=HIDDEN, cell=cell, spectral_radius=1.2, early_stopping=False, frame=1,
        readout="last", conv_kernels=None, optimizer=optimizer, learning_rate=0.01,
        batch_size=BATCH, max_iter=1, tol=0.0, device="cuda", random_state=0,
    )
    waits, _ = synchronizations(lambda: model.fit(X, y))
    return collections.Counter(waits)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cell", default="tanh", choices=("tanh", "relu", "gru", "lstm"))
    parser.add_argument("--batches", type=int, default=6, help="batches of the longer fit")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("bench_sync_points.py needs a CUDA device; PyTorch sees none here.")
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}; cell {args.cell}, "
          f"batches of {BATCH} x {LENGTH} steps, {HIDDEN} units")
    for optimizer in ("sgd", "simplex"):
        waits_during_fit(args.cell, optimizer, 1)  # warm-up: cuDNN plans, allocator
        once = waits_during_fit(args.cell, optimizer, 1)
        many = waits_during_fit(args.cell, optimizer, args.batches)
        updates = args.batches - 1
        per_update = {line: (many[line] - once[line]) / updates for line in many | once}
        print(f"\n{optimizer}: {sum(per_update.values()):.2f} waits per update "
              f"({sum(once.values())} in a fit of one batch)")
        for line, count in sorted(per_update.items(), key=lambda item: -item[1]):
            if count:
                print(f"  {count:5.2f}  {line}")
        print("  once per fit:")
        for line, count in once.most_common():
            print(f"  {count:5d}  {line}")


if __name__ == "__main__":
    main()
