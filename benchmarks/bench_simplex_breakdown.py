"""Where a simplex update's time goes, part by part, next to a plain clipped-SGD update.

One :class:`~sklearn_rnn.nn.RecurrentNetwork` (6 features, 1 output, squared error)
on one batch of full-length sequences, timed cumulatively, each line adding a stage to
the one before (median milliseconds of 10 calls after a warm-up, the device
synchronized around each call):

- ``plain fwd+bwd+clipped step``: ``net(x, lengths)``, backward, :class:`ClippedSGD`;
- ``fwd no grad`` / ``forward_states no grad``: the two forward passes alone (on a GPU
  ``forward_states`` runs the fused kernel with identity input weights);
- ``forward_states+backward``: what every temporal-gradient update starts with;
- ``+temporal_gradients``: the same, then :func:`~sklearn_rnn.optim.temporal_gradients`
  (the backward pass included);
- ``+norms`` and ``+combine``: then the per-step norms, or one weighted combination,
  each on its own after ``+temporal_gradients``;
- ``simplex step total``: ``SimplexSGD.step(temporal_gradients(...))``, everything.

Then the plain and simplex updates again with cuDNN's TF32 off (GPU only), and with
``--profile`` PyTorch's profiler over three simplex updates (the operators by device
time and by host time; host synchronizations show as ``cudaStreamSynchronize``).

The shapes are those of ``bench_update_cost.py``: batch 100, length 100, 50 units on the
CPU; batch 100, length 1000, 256 units on a GPU.

Usage::

    python benchmarks/bench_simplex_breakdown.py --cell tanh lstm --device cuda --profile
    python benchmarks/bench_simplex_breakdown.py --cell tanh --threads 1
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch
import torch.nn.functional as F

from bench_update_cost import FEATURES, SHAPES, machine, synchronize
from sklearn_rnn.nn import RecurrentNetwork
from sklearn_rnn.optim import ClippedSGD, SimplexSGD, TemporalGradients, temporal_gradients


def median_ms(fn: Callable[[], object], device: str, calls: int = 10) -> float:
    fn()
    synchronize(device)
    times = []
    for _ in range(calls):
        synchronize(device)
        start = time.perf_counter()
        fn()
        synchronize(device)
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def breakdown(cell: str, device: str, profile: bool) -> None:
    batch, length, hidden = SHAPES[device]
    net = RecurrentNetwork(FEATURES, hidden, 1, cell=cell, generator=torch.Generator().manual_seed(0)).to(device)
    data = torch.Generator().manual_seed(1)
    x = torch.randn(batch, length, FEATURES, generator=data).to(device)
    y = torch.randn(batch, 1, generator=data).to(device)
    lengths = torch.full((batch,), length, device=device)
    simplex = SimplexSGD(net.parameters(), lr=0.01, generator=0)
    clipped = ClippedSGD(net.parameters(), lr=0.01)

    def plain() -> None:
        clipped.zero_grad()
        F.mse_loss(net(x, lengths), y).backward()
        clipped.step()

    def forward() -> None:
        with torch.no_grad():
            net(x, lengths)

    def forward_states() -> None:
        with torch.no_grad():
            net.forward_states(x, lengths)

    def states_backward() -> None:
        net.zero_grad()
        F.mse_loss(net.forward_states(x, lengths).outputs, y).backward()

    def temporal() -> TemporalGradients:
        net.zero_grad()
        states = net.forward_states(x, lengths)
        return temporal_gradients(net, states, F.mse_loss(states.outputs, y), lengths)

    def norms() -> None:
        temporal().norms()

    def combine() -> None:
        tg = temporal()
        tg.combine(torch.rand(tg.steps, device=device))

    def simplex_update() -> None:
        simplex.zero_grad()
        simplex.step(temporal())

    print(f"== {cell}: batch {batch}, length {length}, {hidden} units; median ms of 10 calls")
    stages = [
        ("plain fwd+bwd+clipped step", plain), ("fwd no grad", forward),
        ("forward_states no grad", forward_states), ("forward_states+backward", states_backward),
        ("+temporal_gradients", temporal), ("+norms", norms), ("+combine", combine),
        ("simplex step total", simplex_update),
    ]
    for name, fn in stages:
        print(f"{name:32} {median_ms(fn, device):8.2f}", flush=True)
    if device == "cuda":
        torch.backends.cudnn.allow_tf32 = False
        print(f"cudnn tf32=False: plain {median_ms(plain, device):.2f} "
              f"simplex {median_ms(simplex_update, device):.2f}")
        torch.backends.cudnn.allow_tf32 = True
    if profile:
        from torch.profiler import ProfilerActivity
        from torch.profiler import profile as profiler

        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
        with profiler(activities=activities) as prof:
            for _ in range(3):
                simplex_update()
            synchronize(device)
        table = prof.key_averages()
        if device == "cuda":
            print(table.table(sort_by="cuda_time_total", row_limit=22, max_name_column_width=60))
        print(table.table(sort_by="cpu_time_total", row_limit=15, max_name_column_width=60))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cell", nargs="+", default=["tanh"], choices=["tanh", "relu", "gru", "lstm"])
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--profile", action="store_true", help="PyTorch's profiler over 3 simplex updates")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(f"machine: {machine(args.device, args.threads)}")
    for cell in args.cell:
        breakdown(cell, args.device, args.profile)


if __name__ == "__main__":
    main()
