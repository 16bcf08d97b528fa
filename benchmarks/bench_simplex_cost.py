"""Cost of one SimplexSGD update relative to one ClippedSGD update of the same network.

Batch 100, length 100, 6 features, 50 tanh units, 4 classes, on 2 CPU threads (the
issue's setting). Both updates are timed interleaved, one after the other, so that a
busy machine slows both alike; the ratio of medians is printed. The simplex update runs
with ``switch_threshold=None`` so that every step computes the norms and the
combination (its most expensive branch).

Run from the repository root (or anywhere after ``pip install -e .``):
``PYTHONPATH=. python benchmarks/bench_simplex_cost.py [--repeats 100] [--threads 2]``.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
import torch.nn.functional as F

from sklearn_rnn.nn import RecurrentNetwork
from sklearn_rnn.optim import ClippedSGD, SimplexSGD, temporal_gradients


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--length", type=int, default=100)
    parser.add_argument("--features", type=int, default=6)
    parser.add_argument("--hidden", type=int, default=50)
    parser.add_argument("--repeats", type=int, default=100)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)

    gen = torch.Generator().manual_seed(0)
    x = torch.randn(args.batch, args.length, args.features, generator=gen).to(device)
    lengths = torch.full((args.batch,), args.length).to(device)
    y = torch.randint(0, 4, (args.batch,), generator=gen).to(device)

    def network() -> RecurrentNetwork:
        return RecurrentNetwork(
            args.features, args.hidden, 4, generator=torch.Generator().manual_seed(1)
        ).to(device)

    clipped_net, simplex_net = network(), network()
    # A tiny lr keeps both networks near their (identical) start over all repeats.
    clipped = ClippedSGD(clipped_net.parameters(), lr=1e-6)
    simplex = SimplexSGD(simplex_net.parameters(), lr=1e-6, switch_threshold=None, generator=0)

    def clipped_update() -> None:
        clipped.zero_grad()
        F.cross_entropy(clipped_net(x, lengths), y).backward()
        clipped.step()

    def simplex_update() -> None:
        simplex.zero_grad()
        states = simplex_net.forward_states(x, lengths)
        loss = F.cross_entropy(states.outputs, y)
        simplex.step(temporal_gradients(simplex_net, states, loss, lengths))

    def timed(update) -> float:
        if device.type == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        update()
        if device.type == "cuda":
            torch.cuda.synchronize()
        return time.perf_counter() - start

    for _ in range(10):  # warm-up
        clipped_update()
        simplex_update()
    times: dict[str, list[float]] = {"clipped": [], "simplex": []}
    for i in range(args.repeats):
        # Alternate the order so that neither always runs on a warmer cache.
        order = (("clipped", clipped_update), ("simplex", simplex_update))
        for name, update in order if i % 2 == 0 else order[::-1]:
            times[name].append(timed(update))
    med = {name: statistics.median(t) for name, t in times.items()}
    low = {name: min(t) for name, t in times.items()}
    print(
        f"batch {args.batch}, length {args.length}, {args.features} features, {args.hidden} hidden, "
        f"{args.threads} threads, {device}, {args.repeats} repeats"
    )
    for name in times:
        print(f"{name:8s} update: median {med[name] * 1e3:8.2f} ms   min {low[name] * 1e3:8.2f} ms")
    print(f"ratio simplex / clipped: median {med['simplex'] / med['clipped']:.3f}   "
          f"min {low['simplex'] / low['clipped']:.3f}")
    print(f"branches: {simplex.branch_counts}")


if __name__ == "__main__":
    main()
