"""Time of one streaming update of M estimators: stacked (``StackedStream``) against their own ``partial_fit``.

A benchmark of the stacked trainer's internals: it imports the private
``sklearn_rnn._stacked``, whose parts no public estimator runs alone (the public
entry is :class:`~sklearn_rnn.RNNGridSearchCV`); the networks it times are the
public estimators' own.

The thesis' experiments (``experiments/_stream.py``) train each estimator on an endless
stream of fresh batches, one ``partial_fit(X_batch, y_batch)`` per batch, and run their
seeds and methods one after the other. :class:`sklearn_rnn._stacked.StackedStream` runs
M such streams side by side as one stacked model. This script times, side by side in
one run, at the thesis' settings (temporal order task, ``make_temporal_order``, minimal
length T=50, batches of 100 fresh sequences, 50 tanh units, spectral radius 1.2, clipping
threshold 1, step 0.05, ``frame=1``, ``readout='last'``, ``conv_kernels=None``), for
``optimizer='sgd'`` (clipped SGD, eq. 3.6) and ``'simplex'`` (algorithm 3.2):

- alone: M estimators (seeds 0..M-1), each given its batch by its own ``partial_fit``,
  one after the other: the time of one update of all M;
- stacked: M twins of those estimators (the same first ``partial_fit``) given the same
  batches by one ``StackedStream.update`` call (input validation and encoding through
  each estimator's own ``_prepare`` included; the weights are written back once, after
  the timing, as a stream does at its validation checks).

Each estimator gets its own fresh batch per update; both sides get the same batches.
Rounds alternate the two sides and the medians of the rounds are compared:
``alone / stacked`` is the speed-up, and ``stacked(M) / alone(1)`` the cost of the M
stacked updates in units of one estimator's ``partial_fit`` (issue 21 asks for at most
3 at M=16). At the end each stacked estimator's weights are compared with its twin's (``max |dw|``,
the largest over the M estimators), next to the *floor*: the same comparison between
the twin and a third copy trained by its own ``partial_fit`` calls with the recurrence
run as the stack runs it (``vectorizable``: a step loop in plain operations instead of
PyTorch's fused kernel). Training amplifies float32 rounding differences from update to
update (spectral radius 1.2, 50 steps): two runs of the same algorithm that round
differently drift apart by about 1e-2 after 50 updates, stacked or not.

Usage::

    python benchmarks/bench_stream_stack.py                 # about 5 minutes, one thread
    python benchmarks/bench_stream_stack.py --quick         # a check, seconds
    python benchmarks/bench_stream_stack.py --models 1 8 16 32 --rounds 5
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time

import numpy as np
import torch
from sklearn.base import clone

from sklearn_rnn import RNNClassifier
from sklearn_rnn._stacked import StackedStream
from sklearn_rnn.datasets import make_temporal_order

BATCH, HIDDEN, CLASSES = 100, 50, 4


def make_models(optimizer: str, count: int) -> list[RNNClassifier]:
    """The thesis' streaming estimator (``experiments/_stream.py``'s settings), seeds 0..count-1."""
    return [
        RNNClassifier(
            hidden_size=HIDDEN, cell="tanh", optimizer=optimizer, learning_rate=0.05, clip_threshold=1.0,
            spectral_radius=1.2, batch_size=BATCH, frame=1, readout="last", conv_kernels=None,
            random_state=seed, label_smoothing=0.0,  # the experiments' plain cross-entropy
        )
        for seed in range(count)
    ]


def largest_difference(a: RNNClassifier, b: RNNClassifier) -> float:
    return max(float((p - q).detach().abs().max()) for p, q in zip(a.module_.parameters(), b.module_.parameters()))


def compare(optimizer: str, count: int, length: int, rounds: int, updates: int) -> dict[str, float]:
    """Median seconds per update of ``count`` estimators, alone and stacked."""
    rng = np.random.default_rng(count)
    alone = make_models(optimizer, count)
    stacked = [clone(model) for model in alone]
    first = [make_temporal_order(BATCH, length, random_state=rng) for _ in alone]
    for a, b, (X, y) in zip(alone, stacked, first):
        a.partial_fit(X, y, classes=np.arange(CLASSES))
        b.partial_fit(X, y, classes=np.arange(CLASSES))
    stream = StackedStream(stacked)
    # The first update of each side is a warm-up (not timed).
    draws = [[make_temporal_order(BATCH, length, random_state=rng) for _ in range(count)]
             for _ in range(1 + rounds * updates)]
    for model, (X, y) in zip(alone, draws[0]):
        model.partial_fit(X, y)
    stream.update(draws[0])
    times: dict[str, list[float]] = {"alone": [], "stacked": []}
    for r in range(rounds):
        block = draws[1 + r * updates : 1 + (r + 1) * updates]
        sides = ["alone", "stacked"] if r % 2 == 0 else ["stacked", "alone"]
        for side in sides:
            start = time.perf_counter()
            for batches in block:
                if side == "alone":
                    for model, (X, y) in zip(alone, batches):
                        model.partial_fit(X, y)
                else:
                    stream.update(batches)
            times[side].append((time.perf_counter() - start) / updates)
    stream.write_back()
    difference = max(largest_difference(a, b) for a, b in zip(alone, stacked))
    assert [a.n_iter_ for a in alone] == [b.n_iter_ for b in stacked]
    # The rounding floor, untimed: each estimator's own partial_fit calls again, with its
    # recurrence run as the stack runs it (the step loop in plain operations) instead of
    # the fused kernel. Training amplifies a rounding difference from update to update
    # (radius 1.2, 50 steps), so after tens of updates the two runs of the same
    # algorithm differ as much as the stacked and the alone run do.
    looped = []
    for model, (X, y) in zip(make_models(optimizer, count), first):
        model.partial_fit(X, y, classes=np.arange(CLASSES))
        model.net_.module_.vectorizable = True
        looped.append(model)
    for batches in draws:
        for model, (X, y) in zip(looped, batches):
            model.partial_fit(X, y)
    floor = max(largest_difference(a, b) for a, b in zip(alone, looped))
    return {
        "alone": statistics.median(times["alone"]),
        "stacked": statistics.median(times["stacked"]),
        "difference": difference,
        "floor": floor,
        "updates": alone[0].n_iter_,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", type=int, nargs="+", default=[1, 8, 16])
    parser.add_argument("--optimizer", nargs="+", default=["sgd", "simplex"], choices=["sgd", "simplex", "adam"])
    parser.add_argument("--length", type=int, default=50)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--updates", type=int, default=8, help="updates per round and side")
    parser.add_argument("--quick", action="store_true", help="M=1, 2, one round of 2 updates: a check")
    args = parser.parse_args()
    if args.quick:
        args.models, args.rounds, args.updates, args.length = [1, 2], 1, 2, 10
    torch.set_num_threads(args.threads)
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, torch "
          f"{torch.__version__}, {args.threads} threads, load average {os.getloadavg()[0]:.2f} at the start")
    print(f"temporal order T={args.length}, batch {BATCH}, {HIDDEN} tanh units; {args.rounds} rounds of "
          f"{args.updates} updates per side (alternating), medians")
    print(f"{'optimizer':>9} {'M':>3} {'alone ms':>10} {'stacked ms':>11} {'alone/stacked':>14} "
          f"{'stacked/one':>12} {'max |dw|':>9} {'floor':>8}")
    for optimizer in args.optimizer:
        one = None
        for count in args.models:
            result = compare(optimizer, count, args.length, args.rounds, args.updates)
            if count == 1:
                one = result["alone"]
            per_one = "" if one is None else f"{result['stacked'] / one:12.2f}"
            print(f"{optimizer:>9} {count:>3} {1e3 * result['alone']:10.1f} {1e3 * result['stacked']:11.1f} "
                  f"{result['alone'] / result['stacked']:14.2f} {per_one:>12} {result['difference']:9.1e} "
                  f"{result['floor']:8.1e}",
                  flush=True)
    print(f"load average {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    main()
