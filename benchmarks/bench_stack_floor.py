"""How far below 3x one fit's update can 16 stacked networks go on this CPU? (issue 21)

A benchmark of the stacked trainer's internals: it imports the private
``sklearn_rnn._stacked``, whose parts no public estimator runs alone (the public
entry is :class:`~sklearn_rnn.RNNGridSearchCV`); the networks it times are the
public estimators' own.

Issue 21 asks that one update of 16 stacked networks cost at most 3 times one
network's update. On the PBC grid one fit's update costs about 2.2-2.4 ms
(``python benchmarks/bench_cv.py --skip-grid``), most of it per-operation overhead;
16 networks do 16 times its arithmetic. This script measures, side by side in one
process on one thread, the forward and backward pass of the networks of the grid (the
first batch of 16 of them: 4 settings x 4 folds, 'decay' cell, 50 units, the gaps as
time channel):

- **stacked trainer**: the package's stacked forward pass (``torch.func.vmap`` over
  ``functional_call`` of the network) and its backward pass, for 16, 4 and 1
  networks (1: the plain call the stack uses for a stack of one);
- **batched core**: the same arithmetic core written directly as batched products
  over a leading model dimension (no vmap): input projection, the decay recurrence,
  the readout of the last step; without the network's masking, input decay, length
  gathering and loss, so a lower bound on what any stacked forward and backward pass
  of these networks costs at the measured rate of the operations.

If the batched core alone for 16 networks costs more than about twice one fit's whole
update, the 3x target cannot be met on this machine by a faster stacked forward pass:
Adam, the batches and the per-epoch records come on top (about 1.7 ms for 16 networks,
``docs/user_guide/stacked_search.rst``).

Usage: ``python benchmarks/bench_stack_floor.py [--repeats 100]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
import warnings
from collections.abc import Callable

import numpy as np
import torch

from bench_cv import prepared_members
from sklearn_rnn._stacked import _Stack
from sklearn_rnn.clinical import load_pbc_cohort
from sklearn_rnn.clinical._pbc_study import YEAR


def median_ms(run: Callable[[], tuple[float, float]], repeats: int) -> tuple[float, float]:
    """Median forward and backward milliseconds of ``run() -> (forward s, backward s)``."""
    times = [run() for _ in range(repeats)]
    return (1e3 * statistics.median(f for f, _ in times), 1e3 * statistics.median(b for _, b in times))


def stacked_pass(stack: _Stack, batch: dict, count: int) -> tuple[float, float]:
    """One forward and backward pass of the first ``count`` stacked networks."""
    flat = stack.flat[:count].detach().clone().requires_grad_(True)
    params = stack._views(flat)
    x, lengths = batch["x"][:count], batch["lengths"][:count]
    start = time.perf_counter()
    if count > 1:
        outputs = stack._vmapped_outputs(params, x, lengths)
    else:
        outputs = stack._member_outputs({k: v[0] for k, v in params.items()}, x[0], lengths[0])
    middle = time.perf_counter()
    outputs.square().sum().backward()
    return middle - start, time.perf_counter() - middle


def batched_core(
    models: int, batch: int, steps: int, inputs: int, hidden: int
) -> Callable[[], tuple[float, float]]:
    """A pass of the arithmetic core of ``models`` 'decay' networks as plain batched products."""
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(models, batch, steps, inputs, generator=generator)
    gaps = torch.rand(models, batch, steps, generator=generator)
    w_in = (0.1 * torch.randn(models, inputs, hidden, generator=generator)).requires_grad_()
    b_in = torch.zeros(models, 1, 1, hidden, requires_grad=True)
    w_hh = (0.1 * torch.randn(models, hidden, hidden, generator=generator)).requires_grad_()
    rate = torch.zeros(models, 1, 1, hidden, requires_grad=True)
    w_out = (0.1 * torch.randn(models, hidden, 2, generator=generator)).requires_grad_()

    def run() -> tuple[float, float]:
        start = time.perf_counter()
        projected = torch.matmul(x, w_in[:, None]) + b_in  # (M, B, T, H)
        keep = torch.exp(-torch.nn.functional.softplus(rate) * gaps[..., None])
        keep = torch.cat([torch.zeros_like(keep[:, :, :1]), keep[:, :, 1:]], dim=2)
        move = 1 - keep
        state, states = x.new_zeros(models, batch, hidden), []
        for u, k, m in zip(projected.unbind(2), keep.unbind(2), move.unbind(2)):
            state = k * state + m * torch.tanh(torch.baddbmm(u, state, w_hh.transpose(1, 2)))
            states.append(state)
        outputs = torch.bmm(torch.stack(states, 2)[:, :, -1], w_out)
        middle = time.perf_counter()
        outputs.square().sum().backward()
        for parameter in (w_in, b_in, w_hh, rate, w_out):
            parameter.grad = None
        return middle - start, time.perf_counter() - middle

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=100)
    args = parser.parse_args()
    torch.set_num_threads(1)
    warnings.simplefilter("ignore")
    cohort = load_pbc_cohort(1, 1, 2)
    X = [np.column_stack([x[:, 0] / YEAR, x[:, 1:]]) for x in cohort.sequences]
    members, _ = prepared_members(X, cohort.y, 16, 3)
    stack = _Stack(members)
    first = [m.estimator.net_.get_iterator(m.train, training=True).batches()[0] for m in members]
    batch = stack.train_pool.batch(dict(enumerate(first)), list(range(16)))
    _, batch_size, steps, inputs = batch["x"].shape
    hidden = members[0].estimator.net_.module_.hidden_size
    print(f"load average {os.getloadavg()[0]:.1f}; first batch of each network: {batch_size} "
          f"sequences (padded), {steps} steps, {inputs} input channels, {hidden} units; "
          f"median of {args.repeats} passes, ms")
    print(f"{'':28} {'forward':>8} {'backward':>9} {'total':>7}")
    for count in (1, 4, 16):
        stacked_pass(stack, batch, count)  # warm-up
        forward, backward = median_ms(lambda: stacked_pass(stack, batch, count), args.repeats)
        print(f"stacked trainer, {count:2d} network{'s' if count > 1 else ' '} "
              f"{forward:8.2f} {backward:9.2f} {forward + backward:7.2f}")
    for count in (1, 16):
        run = batched_core(count, batch_size, steps, inputs, hidden)
        run()
        forward, backward = median_ms(run, args.repeats)
        print(f"batched core, {count:2d} network{'s' if count > 1 else ' '}   "
              f"{forward:8.2f} {backward:9.2f} {forward + backward:7.2f}")
    print(f"load average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
