"""Which recurrence trains faster on a CPU, per cell: the fused kernel or the step-by-step one.

Each cell can run a layer two ways: PyTorch's fused kernel (``torch.rnn_tanh``,
``torch.gru``, ``torch.lstm``) under autograd, or the package's step-by-step recurrence
with its hand-written backward pass (:func:`sklearn_rnn.nn.cells.stepwise_recurrence`).
A cell's :attr:`~sklearn_rnn.nn.cells.Cell.trains_stepwise` says which one ``fit`` uses
on a CPU; this script measures the choice.

- ``layer`` (default): one forward and backward pass of one layer (input projection
  included on both sides), at the shapes of the defaults benchmark (batch 32, 20-300
  steps) and of the streaming benchmark (batch 100, 50 steps); alternating, median ms.
- ``--fit``: whole ``RNNClassifier(cell=...)`` fits at defaults on a synthetic set
  (``make_first_step``-like: 300 sequences of ``--length`` steps), with the cell's
  ``trains_stepwise`` set off and on in turn, in one process; median seconds, and the
  accuracy of each (the two recurrences agree to rounding, so training trajectories may
  part after many epochs).
- ``--baseline DIR``: the step-by-step layer of another version of the package (a
  checkout in ``DIR``) against this one, before and after in one run: two worker
  processes, each with its checkout first on ``PYTHONPATH``, time the same layer in
  turn (the order alternating), and the median of the paired ratios after/before is
  reported with how many of the pairs were faster after. On a machine shared with other
  jobs, pairs taken moments apart compare better than two runs minutes apart.

Usage::

    python benchmarks/bench_recurrence.py                  # about a minute
    python benchmarks/bench_recurrence.py --fit --cell gru --length 100
    python benchmarks/bench_recurrence.py --quick          # a check, seconds
    python benchmarks/bench_recurrence.py --baseline /tmp/base  # before/after, paired
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable

import numpy as np
import torch

from bench_update_cost import Worker, machine, serve
from sklearn_rnn import RNNClassifier
from sklearn_rnn.nn import get_cell
from sklearn_rnn.nn.cells import stepwise_recurrence

MODULES = {"tanh": torch.nn.RNN, "relu": torch.nn.RNN, "gru": torch.nn.GRU, "lstm": torch.nn.LSTM}
SHAPES = [(32, 20, 12), (32, 100, 1), (32, 300, 1), (100, 50, 6)]  # batch, steps, features
HIDDEN = 50


def layer_passes(cell: str, batch: int, steps: int, features: int) -> dict[str, Callable[[], None]]:
    """One layer's forward and backward pass, fused and step by step, on the same shapes."""
    gates = get_cell(cell).gates
    x = torch.randn(batch, steps, features, generator=torch.Generator().manual_seed(0))
    options = {"nonlinearity": cell} if cell in ("tanh", "relu") else {}
    fused_layer = MODULES[cell](features, HIDDEN, batch_first=True, **options)
    projection = torch.nn.Linear(features, gates * HIDDEN)
    weight = torch.nn.Parameter(fused_layer.weight_hh_l0.detach().clone())
    bias = torch.nn.Parameter(fused_layer.bias_hh_l0.detach().clone()) if cell == "gru" else None

    def fused() -> None:
        fused_layer(x)[0][:, -1].sum().backward()

    def stepwise() -> None:
        _, hidden, _ = stepwise_recurrence(cell, projection(x), weight, bias, ())
        hidden[:, -1].sum().backward()

    return {"fused": fused, "stepwise": stepwise}


def median_ms(passes: dict[str, Callable[[], None]], repeats: int, calls: int) -> dict[str, float]:
    for run in passes.values():
        run()  # warm-up
    times: dict[str, list[float]] = {name: [] for name in passes}
    for _ in range(repeats):
        for name, run in passes.items():
            start = time.perf_counter()
            for _ in range(calls):
                run()
            times[name].append((time.perf_counter() - start) / calls)
    return {name: 1e3 * statistics.median(values) for name, values in times.items()}


def worker_stepwise_ms(cell: str, batch: int, steps: int, features: int, calls: int) -> float:
    """In a worker (``--baseline``): ms per step-by-step layer pass of its checkout."""
    key = (cell, batch, steps, features)
    if key not in _PASSES:
        _PASSES[key] = layer_passes(cell, batch, steps, features)["stepwise"]
        _PASSES[key]()  # warm-up
    run = _PASSES[key]
    start = time.perf_counter()
    for _ in range(calls):
        run()
    return 1e3 * (time.perf_counter() - start) / calls


_PASSES: dict[tuple[int | str, ...], Callable[[], None]] = {}


def compare(args: argparse.Namespace, repeats: int) -> None:
    """The step-by-step layer of ``--baseline`` and of this checkout, paired and alternating."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    versions = {"before": Worker(__file__, args.baseline, args.threads),
                "after": Worker(__file__, root, args.threads)}
    for name, worker in versions.items():
        print(f"{name}: {worker.package}")
    print(f"one layer of {HIDDEN} units step by step, forward and backward, {repeats} pairs, "
          "median ms and the median paired ratio")
    print(f"{'cell':5} {'batch':>5} {'steps':>5} {'feat':>4} {'before':>8} {'after':>8} {'after/before':>13} "
          f"{'faster':>7}")
    for cell in args.cell:
        for batch, steps, features in SHAPES[:1] if args.quick else SHAPES:
            calls = 1 if args.quick else max(3, 20_000 // (batch * steps))
            shape = {"cell": cell, "batch": batch, "steps": steps, "features": features}
            times: dict[str, list[float]] = {name: [] for name in versions}
            for index in range(repeats):
                order = list(versions) if index % 2 == 0 else list(versions)[::-1]
                for name in order:
                    times[name].append(versions[name].call("stepwise", calls=calls, **shape))
            ratios = [after / before for before, after in zip(times["before"], times["after"])]
            print(f"{cell:5} {batch:5d} {steps:5d} {features:4d} {statistics.median(times['before']):8.2f} "
                  f"{statistics.median(times['after']):8.2f} {statistics.median(ratios):13.2f} "
                  f"{sum(ratio < 1 for ratio in ratios):3d} / {len(ratios)}")
    for worker in versions.values():
        worker.close()


def synthetic(length: int, seed: int) -> tuple[list[np.ndarray], np.ndarray]:
    """300 sequences of ``length // 2`` to ``length`` steps; the label is the sign of the first step."""
    rng = np.random.default_rng(seed)
    X = [rng.standard_normal((int(rng.integers(length // 2, length + 1)), 2)) for _ in range(300)]
    return X, np.array([int(x[0, 0] > 0) for x in X])


def fit_seconds(cell: str, length: int, repeats: int, max_iter: int) -> None:
    X, y = synthetic(length, 0)
    X_test, y_test = synthetic(length, 1)
    chosen_cell = get_cell(cell)  # the registered instance that the networks ask
    chosen = chosen_cell.trains_stepwise
    times: dict[bool, list[float]] = {False: [], True: []}
    scores: dict[bool, float] = {}
    RNNClassifier(cell=cell, max_iter=1, random_state=0).fit(X, y)  # warm-up: lazy imports
    try:
        for _ in range(repeats):
            for flag in (False, True):
                chosen_cell.trains_stepwise = flag
                model = RNNClassifier(cell=cell, max_iter=max_iter, random_state=0)
                start = time.perf_counter()
                model.fit(X, y)
                times[flag].append(time.perf_counter() - start)
                scores[flag] = model.score(X_test, y_test)
    finally:
        chosen_cell.trains_stepwise = chosen
    fused, stepwise = statistics.median(times[False]), statistics.median(times[True])
    print(f"{cell:5} fit at defaults (max_iter={max_iter}), {length // 2}-{length} steps: "
          f"fused {fused:.2f} s (accuracy {scores[False]:.3f}), stepwise {stepwise:.2f} s "
          f"(accuracy {scores[True]:.3f}), stepwise/fused {stepwise / fused:.2f}; "
          f"trains_stepwise={chosen}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cell", nargs="+", default=list(MODULES), choices=list(MODULES))
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--fit", action="store_true", help="whole fits at defaults instead of one layer")
    parser.add_argument("--length", type=int, default=100, help="--fit: the longest sequence")
    parser.add_argument("--max-iter", type=int, default=30, help="--fit: epochs of each fit")
    parser.add_argument("--quick", action="store_true", help="one repeat, small shapes: a check")
    parser.add_argument("--baseline", metavar="DIR",
                        help="a checkout of another version: its step-by-step layer against this one's, paired")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if args.serve:
        serve({"stepwise": worker_stepwise_ms})
        return
    print(f"machine: {machine('cpu', args.threads)}, load average {os.getloadavg()[0]:.1f} at the start")
    repeats = 1 if args.quick else args.repeats
    if args.baseline:
        compare(args, 2 if args.quick else args.repeats)
    elif args.fit:
        for cell in args.cell:
            fit_seconds(cell, 20 if args.quick else args.length, repeats, 2 if args.quick else args.max_iter)
    else:
        print(f"one layer of {HIDDEN} units, forward and backward, median ms of {repeats} rounds")
        print(f"{'cell':5} {'batch':>5} {'steps':>5} {'feat':>4} {'fused':>8} {'stepwise':>9} {'ratio':>6}  trains_stepwise")
        for cell in args.cell:
            for batch, steps, features in SHAPES[:1] if args.quick else SHAPES:
                calls = 1 if args.quick else max(3, 20_000 // (batch * steps))
                ms = median_ms(layer_passes(cell, batch, steps, features), repeats, calls)
                print(f"{cell:5} {batch:5d} {steps:5d} {features:4d} {ms['fused']:8.2f} {ms['stepwise']:9.2f} "
                      f"{ms['stepwise'] / ms['fused']:6.2f}  {get_cell(cell).trains_stepwise}")
    print(f"load average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
