"""What torch.compile would give the stacked trainer: one pass of 16 networks, eager and compiled.

A benchmark of the stacked trainer's internals: it imports the private
``sklearn_rnn._stacked``, whose parts no public estimator runs alone (the public
entry is :class:`~sklearn_rnn.RNNGridSearchCV`); the networks it times are the
public estimators' own.

Issue 21 asks for one update of 16 stacked networks to cost at most 3 times one
network's. Profiles (see ``docs/user_guide/stacked_search.rst``) find the stacked
update bound by element-wise arithmetic on ``(16, batch, units)`` blocks, which
restructuring the graph does not change; fusing that arithmetic into compiled kernels
does. This script measures how much, on the stacked trainer's own code: the loss of 16
networks of the PBC grid (``bench_cv.py``'s networks: 4 settings x 4 folds, the
'decay' cell and Adam by default) on their first batch, through the trainer's
vectorized forward pass, and its gradient, eager and under :func:`torch.compile`
(one batch shape), in alternating rounds. It prints the compile time of the first
call, the milliseconds of a forward and backward pass both ways and their ratio, and
the largest difference between the two gradients.

The package does not compile: every new batch shape compiles again (the grid's
batches vary in length and size), a C compiler must be present at run time, and the
first call's compile time is paid before any training. This script is the evidence.

Usage: ``PYTHONPATH=. python benchmarks/bench_stack_compile.py [--cell decay] [--calls 30]
[--rounds 2]`` (needs a C compiler; about a minute of compiling).
"""

from __future__ import annotations

import argparse
import os
import time
import warnings

import numpy as np
import torch

import bench_cv
from sklearn_rnn._stacked import _Stack
from sklearn_rnn.clinical import load_pbc_cohort


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cell", default="decay", choices=["decay", "tanh", "gru", "lstm"])
    parser.add_argument("--calls", type=int, default=30, help="timed passes per round and way")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(1)
    bench_cv.SETUP.update(cell=args.cell, optimizer="adam")
    cohort = load_pbc_cohort(1, 1, 2)
    X, y = cohort.sequences, np.asarray(cohort.y)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        members, _ = bench_cv.prepared_members(X, y, 16, epochs=1)
    stack = _Stack(members)
    first = {
        row: member.estimator.net_.get_iterator(member.train, training=True).batches()[0]
        for row, member in zip(stack.live, stack.members)
    }
    batch = stack.train_pool.batch(first, stack.live)

    def loss(flat: torch.Tensor) -> torch.Tensor:
        params = stack._views(flat)
        data, _ = stack._loss(params, batch["x"], batch["lengths"], batch["y"], batch["weight"], batch["count"])
        return (data + stack._penalty(params)).sum()

    flat = stack.flat.detach().clone().requires_grad_(True)

    def gradient(function: object) -> torch.Tensor:
        (grad,) = torch.autograd.grad(function(flat), [flat])
        return grad

    compiled = torch.compile(loss, dynamic=False)
    start = time.perf_counter()
    compiled_grad = gradient(compiled)
    compile_seconds = time.perf_counter() - start
    difference = float((gradient(loss) - compiled_grad).abs().max())
    print(f"cell={args.cell!r}, 16 networks, batch {tuple(batch['x'].shape)} (networks, sequences, "
          f"steps, inputs), one torch thread, load {os.getloadavg()[0]:.2f}")
    print(f"first compiled call (compiling): {compile_seconds:.1f} s; largest gradient difference "
          f"{difference:.2e} (largest entry {float(compiled_grad.abs().max()):.2f})")
    times: dict[str, list[float]] = {"eager": [], "compiled": []}
    for _ in range(args.rounds):
        for name, function in (("eager", loss), ("compiled", compiled)):
            gradient(function)
            start = time.perf_counter()
            for _ in range(args.calls):
                gradient(function)
            times[name].append(1000 * (time.perf_counter() - start) / args.calls)
    for name, values in times.items():
        print(f"{name:8s}: {np.round(values, 2).tolist()} ms per forward and backward pass")
    ratio = float(np.median(times["compiled"]) / np.median(times["eager"]))
    print(f"compiled / eager (medians): {ratio:.2f}; load {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
