"""Time per update, side by side in one run: plain PyTorch, the estimator, the simplex method.

For each cell asked for (``--cell``), all train the same network shape (6 features, 50
units, linear readout at the last step, squared error) on batches of 100 sequences of
length 100 (on a GPU: length 1000, 256 units):

- plain: ``nn.RNN`` / ``nn.GRU`` / ``nn.LSTM`` + ``nn.Linear`` with the clipped
  anti-gradient step (eq. 3.6), batches ready-made;
- estimator, sgd: ``RNNRegressor(optimizer='sgd', cell=...)``, everything ``fit`` does
  per update (batch assembly, skorch's callbacks and history);
- estimator, simplex: ``RNNRegressor(optimizer='simplex', cell=...)`` with no switching,
  so every update computes the temporal gradients and the simplex direction (its
  costliest case).

Runs alternate and the medians are compared. Goals: estimator/plain <= 1.3 (CPU and
GPU); simplex/sgd <= 1.25 (CPU), <= 1.3 (GPU).

Before and after, in one run: ``--baseline DIR`` names a checkout of another version
of the package (e.g. ``git worktree add /tmp/base <commit>``). The estimators of both
versions are then timed in two worker processes, each with its own checkout first on
its import path (``PYTHONPATH``), alternating with the plain loop of this process, and
the table shows both side by side (the *sgd* and *simplex* columns of each).

Usage::

    python benchmarks/bench_update_cost.py --cell all --threads 1    # a few minutes
    python benchmarks/bench_update_cost.py --cell all --quick        # a check, ~1 minute
    python benchmarks/bench_update_cost.py --cell lstm --device cuda # GPU shape
    python benchmarks/bench_update_cost.py --cell lstm --precision bfloat16  # estimators
                                                  # in mixed precision (plain: float32)
    python benchmarks/bench_update_cost.py --cell tanh --baseline /tmp/base  # before/after
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from sklearn.exceptions import ConvergenceWarning

from sklearn_rnn import RNNRegressor
from sklearn_rnn.optim import ClippedSGD

CELLS = ("tanh", "relu", "gru", "lstm")
FEATURES = 6
#: (batch, length, hidden) per device, as the issue fixes them.
SHAPES = {"cpu": (100, 100, 50), "cuda": (100, 1000, 256)}


def data(batch: int, length: int, batches: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(batch * batches, length, FEATURES)).astype(np.float32)
    return X, X[:, -5:, 0].sum(axis=1)


def synchronize(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def estimator_seconds_per_update(
    X: np.ndarray, y: np.ndarray, *, cell: str, optimizer: str, hidden: int, batch: int,
    epochs: int, device: str, precision: str = "float32",
) -> float:
    model = RNNRegressor(
        hidden_size=hidden, cell=cell, spectral_radius=1.2, early_stopping=False, frame=1,
        readout="last", conv_kernels=None,  # the plain loop's network: raw inputs, last state
        optimizer=optimizer, learning_rate=0.01, batch_size=batch,
        max_iter=epochs, tol=0.0, device=device, precision=precision, random_state=0,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model.fit(X, y)
    # skorch's per-epoch durations: the training loop only, not the input validation.
    return float(sum(model.net_.history[:, "dur"])) / (epochs * (len(X) // batch))


def plain_seconds_per_update(
    X: np.ndarray, y: np.ndarray, *, cell: str, hidden: int, batch: int, epochs: int, device: str
) -> float:
    torch.manual_seed(0)  # benchmark script, not library code
    if cell in ("tanh", "relu"):
        rnn = torch.nn.RNN(FEATURES, hidden, nonlinearity=cell, batch_first=True)
    else:
        rnn = {"gru": torch.nn.GRU, "lstm": torch.nn.LSTM}[cell](FEATURES, hidden, batch_first=True)
    rnn, readout = rnn.to(device), torch.nn.Linear(hidden, 1).to(device)
    params = [*rnn.parameters(), *readout.parameters()]
    optimizer = ClippedSGD(params, lr=0.01, clip_threshold=1.0)
    inputs = torch.as_tensor(X, device=device)
    targets = torch.as_tensor((y - y.mean()) / y.std(), dtype=torch.float32, device=device)[:, None]
    synchronize(device)
    start = time.perf_counter()
    for _ in range(epochs):
        for rows in torch.randperm(len(inputs), device=device).split(batch):
            hidden_states, _ = rnn(inputs[rows])
            loss = torch.nn.functional.mse_loss(readout(hidden_states[:, -1]), targets[rows])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    synchronize(device)
    return (time.perf_counter() - start) / (epochs * (len(inputs) // batch))


class Worker:
    """A process that runs this script's timing functions on the ``sklearn_rnn`` of
    ``root`` (its checkout first on ``PYTHONPATH``), one request at a time.

    The timed code runs in the worker; it answers with the seconds per update. Both
    versions compared run in such workers, so that neither has an advantage.
    """

    def __init__(self, script: str, root: str, threads: int) -> None:
        path = os.pathsep.join(filter(None, [os.path.abspath(root), os.environ.get("PYTHONPATH")]))
        self.process = subprocess.Popen(
            [sys.executable, os.path.abspath(script), "--serve", "--threads", str(threads)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
            env={**os.environ, "PYTHONPATH": path}, cwd=os.path.abspath(root),
        )
        self.package = self.call("package")

    def call(self, function: str, **kwargs: Any) -> Any:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(json.dumps({"function": function, "kwargs": kwargs}) + "\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"the worker of {self.package if hasattr(self, 'package') else '?'} ended")
        return json.loads(line)["result"]

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait()


def serve(functions: dict[str, Callable[..., Any]]) -> None:
    """The worker's side of :class:`Worker`: answer requests from standard input."""
    import sklearn_rnn

    functions = {**functions, "package": lambda: os.path.dirname(sklearn_rnn.__file__)}
    for line in sys.stdin:
        request = json.loads(line)
        result = functions[request["function"]](**request["kwargs"])
        sys.stdout.write(json.dumps({"result": result}) + "\n")
        sys.stdout.flush()


def machine(device: str, threads: int) -> str:
    cpu = platform.processor() or platform.machine()
    text = f"{cpu}, {os.cpu_count()} cores, torch {torch.__version__}, {threads} threads"
    if device == "cuda":
        text += f", {torch.cuda.get_device_name()}"
    return text


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cell", nargs="+", default=["tanh"], choices=[*CELLS, "all"])
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="fewer updates and 1 repeat: a check")
    parser.add_argument("--precision", default="float32", choices=["float32", "bfloat16", "float16"],
                        help="the estimators' precision (the plain loop stays float32)")
    parser.add_argument("--baseline", metavar="DIR",
                        help="a checkout of another version: time both, side by side")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if args.serve:
        serve({"estimator": worker_estimator_seconds})
        return
    if args.baseline:
        compare(args)
        return
    cells = CELLS if "all" in args.cell else tuple(dict.fromkeys(args.cell))
    batch, length, hidden = SHAPES[args.device]
    batches, epochs, repeats = (3, 1, 1) if args.quick else (10, 3, args.repeats)
    X, y = data(batch, length, batches)
    shape = {"hidden": hidden, "batch": batch, "epochs": epochs, "device": args.device}
    print(f"machine: {machine(args.device, args.threads)}")
    print(f"batch {batch}, length {length}, {FEATURES} features, {hidden} hidden, "
          f"{batches * epochs} updates per run, {repeats} repeats, median ms per update, "
          f"estimators in {args.precision}")
    print(f"{'cell':6} {'plain':>8} {'sgd':>8} {'simplex':>8} {'sgd/plain':>10} {'simplex/sgd':>12}")
    for cell in cells:
        # Warm-ups: first calls pay for lazy imports and kernel selection.
        plain_seconds_per_update(X, y, cell=cell, **{**shape, "epochs": 1})
        estimator_seconds_per_update(
            X, y, cell=cell, optimizer="simplex", precision=args.precision, **{**shape, "epochs": 1}
        )
        times: dict[str, list[float]] = {"plain": [], "sgd": [], "simplex": []}
        for _ in range(repeats):
            times["plain"].append(plain_seconds_per_update(X, y, cell=cell, **shape))
            for optimizer in ("sgd", "simplex"):
                times[optimizer].append(
                    estimator_seconds_per_update(
                        X, y, cell=cell, optimizer=optimizer, precision=args.precision, **shape
                    )
                )
        ms = {name: 1e3 * statistics.median(values) for name, values in times.items()}
        print(f"{cell:6} {ms['plain']:8.2f} {ms['sgd']:8.2f} {ms['simplex']:8.2f} "
              f"{ms['sgd'] / ms['plain']:10.2f} {ms['simplex'] / ms['sgd']:12.2f}")
    goal = "1.25" if args.device == "cpu" else "1.3"
    print(f"goals: sgd/plain <= 1.3, simplex/sgd <= {goal}")


def worker_estimator_seconds(cell: str, optimizer: str, precision: str, device: str,
                             batches: int, epochs: int) -> float:
    """:func:`estimator_seconds_per_update` on the data of :func:`main`, in a worker."""
    batch, length, hidden = SHAPES[device]
    X, y = data(batch, length, batches)
    return estimator_seconds_per_update(X, y, cell=cell, optimizer=optimizer, hidden=hidden,
                                        batch=batch, epochs=epochs, device=device, precision=precision)


def compare(args: argparse.Namespace) -> None:
    """Plain loop, the baseline's estimators and this checkout's, alternating."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    versions = {"before": Worker(__file__, args.baseline, args.threads),
                "after": Worker(__file__, root, args.threads)}
    cells = CELLS if "all" in args.cell else tuple(dict.fromkeys(args.cell))
    batch, length, hidden = SHAPES[args.device]
    batches, epochs, repeats = (3, 1, 1) if args.quick else (10, 3, args.repeats)
    X, y = data(batch, length, batches)
    shape = {"hidden": hidden, "batch": batch, "epochs": epochs, "device": args.device}
    print(f"machine: {machine(args.device, args.threads)}, load average {os.getloadavg()[0]:.1f} at the start")
    for name, worker in versions.items():
        print(f"{name}: {worker.package}")
    print(f"batch {batch}, length {length}, {FEATURES} features, {hidden} hidden, "
          f"{batches * epochs} updates per run, {repeats} repeats, median ms per update")
    print(f"{'cell':6} {'plain':>7} {'sgd before':>11} {'sgd after':>10} {'simplex before':>15} "
          f"{'simplex after':>14} {'sgd/plain before':>17} {'after':>6}")
    for cell in cells:
        plain_seconds_per_update(X, y, cell=cell, **{**shape, "epochs": 1})  # warm-ups
        for worker in versions.values():
            worker.call("estimator", cell=cell, optimizer="simplex", precision=args.precision,
                        device=args.device, batches=batches, epochs=1)
        times: dict[str, list[float]] = {}
        for _ in range(repeats):
            times.setdefault("plain", []).append(plain_seconds_per_update(X, y, cell=cell, **shape))
            for optimizer in ("sgd", "simplex"):
                for name, worker in versions.items():
                    times.setdefault(f"{optimizer} {name}", []).append(worker.call(
                        "estimator", cell=cell, optimizer=optimizer, precision=args.precision,
                        device=args.device, batches=batches, epochs=epochs))
        ms = {name: 1e3 * statistics.median(values) for name, values in times.items()}
        print(f"{cell:6} {ms['plain']:7.2f} {ms['sgd before']:11.2f} {ms['sgd after']:10.2f} "
              f"{ms['simplex before']:15.2f} {ms['simplex after']:14.2f} "
              f"{ms['sgd before'] / ms['plain']:17.2f} {ms['sgd after'] / ms['plain']:6.2f}")
    print(f"load average {os.getloadavg()[0]:.1f} at the end")
    for worker in versions.values():
        worker.close()


if __name__ == "__main__":
    main()
