"""Time of one streaming update, side by side in one run: ``partial_fit`` against plain PyTorch.

A streaming user (as ``experiments/_stream.py`` does for hours) calls
``partial_fit(X_batch, y_batch)`` once per fresh batch. This script feeds the same
stream of temporal-order batches (``make_temporal_order``: 100 sequences of length
``T`` to ``1.1 T``, 6 one-hot features, 4 classes) to

- plain: ``nn.RNN`` (50 tanh units) + ``nn.Linear`` read at the last step, cross-entropy,
  the clipped anti-gradient step (eq. 3.6, :class:`~sklearn_rnn.optim.ClippedSGD`); each
  update stacks the batch's arrays into a tensor, as a plain loop over the same stream
  must;
- plain simplex (the 'simplex' rows): the same model and loop with the thesis' optimizer
  as a PyTorch user runs it on their own ``nn.RNN`` (:ref:`plain_pytorch`):
  :class:`~sklearn_rnn.optim.RecurrentAdapter`'s ``forward_states``, the temporal
  gradients and :class:`~sklearn_rnn.optim.SimplexSGD`'s step;
- skorch (the 'sgd' rows, column ``skorch``): the plain loop's network and step as a
  skorch user streams them, ``NeuralNetClassifier(..., train_split=None)`` and one
  ``net.partial_fit(X_batch, y_batch)`` per batch: what skorch's own training call
  costs per update, without the estimator's validation, encoding and guards;
- estimator: ``RNNClassifier(cell='tanh', hidden_size=50, batch_size=100,
  readout='last')`` with ``optimizer='sgd'`` or ``'simplex'`` (no switching: every
  update computes the temporal gradients), one ``partial_fit`` call per batch, timed
  whole: input validation, encoding, skorch's callbacks and history included.

The estimator reads the last step, as the plain loop does: its default readout for
'sgd' (``readout='auto'``, the last state with the mean and maximum over the steps)
is a larger network, whose price ``--readout auto`` shows.

The ratio estimator/plain is the whole cost of calling ``partial_fit`` over writing the
loop by hand with the same optimizer; for 'simplex' the column ``vs clipped`` adds the
ratio to the clipped-SGD loop (the simplex method's extra work included).
Runs alternate and the medians are compared. ``--clock cpu`` times with the CPU time
of the process that runs the update (``time.process_time``) instead of the wall clock:
with one thread the two agree on a quiet machine, and on a machine shared with other
jobs the CPU time leaves out the time the process waited for a core.

Before and after, in one run: ``--baseline DIR`` names a checkout of another version
of the package; ``partial_fit`` of both versions is then timed in two worker processes
(each with its checkout first on ``PYTHONPATH``), alternating with the plain loop.

Usage::

    python benchmarks/bench_partial_fit.py --threads 1             # about two minutes
    python benchmarks/bench_partial_fit.py --quick                 # a check, seconds
    python benchmarks/bench_partial_fit.py --threads 1 --baseline /tmp/base  # before/after
    python benchmarks/bench_partial_fit.py --threads 1 --clock cpu         # on a busy machine
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np
import torch

from bench_update_cost import Worker, machine, serve
from sklearn_rnn import RNNClassifier
from sklearn_rnn.datasets import make_temporal_order
from sklearn_rnn.optim import ClippedSGD, RecurrentAdapter, SimplexSGD, temporal_gradients

BATCH, HIDDEN, FEATURES, CLASSES = 100, 50, 6, 4
LEARNING_RATE, CLIP = 0.01, 1.0
CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}


def stream(length: int, updates: int, seed: int = 0) -> list[tuple[list[np.ndarray], np.ndarray]]:
    """``updates + 1`` batches (the first one a warm-up), drawn once for both sides."""
    rng = np.random.default_rng(seed)
    return [make_temporal_order(BATCH, length, random_state=rng) for _ in range(updates + 1)]


def estimator_seconds_per_update(
    batches: list, optimizer: str, readout: str = "last", clock: str = "wall"
) -> float:
    model = RNNClassifier(
        hidden_size=HIDDEN, cell="tanh", optimizer=optimizer, learning_rate=LEARNING_RATE,
        clip_threshold=CLIP, batch_size=BATCH, random_state=0, readout=readout,
        conv_kernels=None,  # the plain loop reads the raw inputs
        label_smoothing=0.0,  # the plain loop's loss, the plain cross-entropy
    )
    model.partial_fit(*batches[0], classes=np.arange(CLASSES))  # builds the network
    start = CLOCKS[clock]()
    for X, y in batches[1:]:
        model.partial_fit(X, y)
    return (CLOCKS[clock]() - start) / (len(batches) - 1)


class _LastStep(torch.nn.Module):
    """The plain loop's network as a skorch module: ``nn.RNN`` read at the last step."""

    def __init__(self) -> None:
        super().__init__()
        self.rnn = torch.nn.RNN(FEATURES, HIDDEN, nonlinearity="tanh", batch_first=True)
        self.readout = torch.nn.Linear(HIDDEN, CLASSES)

    def forward(self, X: torch.Tensor) -> torch.Tensor:
        return self.readout(self.rnn(X)[0][:, -1])


def skorch_seconds_per_update(batches: list, clock: str = "wall") -> float:
    """A skorch user's stream: one ``NeuralNetClassifier.partial_fit`` per batch."""
    from skorch import NeuralNetClassifier

    torch.manual_seed(0)  # benchmark script, not library code
    net = NeuralNetClassifier(
        _LastStep, criterion=torch.nn.CrossEntropyLoss, optimizer=ClippedSGD,
        optimizer__clip_threshold=CLIP, lr=LEARNING_RATE, batch_size=BATCH,
        train_split=None, max_epochs=1, verbose=0,
    )

    def update(X: list[np.ndarray], y: np.ndarray) -> None:
        net.partial_fit(np.stack(X).astype(np.float32), y.astype(np.int64), classes=np.arange(CLASSES))

    update(*batches[0])
    start = CLOCKS[clock]()
    for X, y in batches[1:]:
        update(X, y)
    return (CLOCKS[clock]() - start) / (len(batches) - 1)


def plain_seconds_per_update(batches: list, clock: str = "wall", optimizer: str = "sgd") -> float:
    """The plain loop's seconds per update: clipped SGD (``optimizer='sgd'``) or the
    simplex method through :class:`~sklearn_rnn.optim.RecurrentAdapter`."""
    torch.manual_seed(0)  # benchmark script, not library code
    rnn = torch.nn.RNN(FEATURES, HIDDEN, nonlinearity="tanh", batch_first=True)
    readout = torch.nn.Linear(HIDDEN, CLASSES)
    net = RecurrentAdapter(rnn, readout)  # the two modules' own parameters, for either optimizer
    step: torch.optim.Optimizer = (
        ClippedSGD(net.parameters(), lr=LEARNING_RATE, clip_threshold=CLIP) if optimizer == "sgd"
        else SimplexSGD(net.parameters(), lr=LEARNING_RATE, clip_threshold=CLIP, generator=0)
    )

    def update(X: list[np.ndarray], y: np.ndarray) -> None:
        inputs = torch.as_tensor(np.stack(X), dtype=torch.float32)  # one length per batch
        targets = torch.as_tensor(y)
        step.zero_grad()
        if optimizer == "sgd":
            states, _ = rnn(inputs)
            torch.nn.functional.cross_entropy(readout(states[:, -1]), targets).backward()
            step.step()
            return
        lengths = torch.full((len(X),), inputs.shape[1])
        network_states = net.forward_states(inputs, lengths)
        loss = torch.nn.functional.cross_entropy(network_states.outputs, targets)
        step.step(temporal_gradients(net, network_states, loss, lengths))

    update(*batches[0])
    start = CLOCKS[clock]()
    for X, y in batches[1:]:
        update(X, y)
    return (CLOCKS[clock]() - start) / (len(batches) - 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--length", type=int, nargs="+", default=[50, 100], help="T of the task")
    parser.add_argument("--optimizer", nargs="+", default=["sgd", "simplex"], choices=["sgd", "simplex"])
    parser.add_argument("--readout", default="last", choices=["last", "auto"],
                        help="the estimator's readout ('last': the plain loop's network)")
    parser.add_argument("--clock", default="wall", choices=sorted(CLOCKS),
                        help="wall clock, or the CPU time of the timed process")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--updates", type=int, default=40, help="timed partial_fit calls per run")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="5 updates, 1 repeat: a check")
    parser.add_argument("--baseline", metavar="DIR",
                        help="a checkout of another version: time both, side by side")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if args.serve:
        serve({"estimator": worker_estimator_seconds})
        return
    updates, repeats = (5, 1) if args.quick else (args.updates, args.repeats)
    if args.baseline:
        compare(args, updates, repeats)
        return
    print(f"machine: {machine('cpu', args.threads)}, load average {os.getloadavg()[0]:.1f} at the start")
    print(f"temporal order, batch {BATCH}, {HIDDEN} tanh units, readout={args.readout!r}, "
          f"{updates} updates per run, {repeats} repeats, median ms per update ({args.clock} clock)")
    print(f"{'T':>4} {'optimizer':9} {'plain':>8} {'partial_fit':>12} {'ratio':>7} {'skorch':>7} "
          f"{'ratio':>6} {'vs clipped':>11}")
    for length in args.length:
        batches = stream(length, updates)
        for optimizer in args.optimizer:
            plain_seconds_per_update(batches[:3], optimizer=optimizer)  # warm-ups: lazy imports, kernels
            estimator_seconds_per_update(batches[:3], optimizer, args.readout)
            if optimizer == "sgd":
                skorch_seconds_per_update(batches[:3])
            times: dict[str, list[float]] = {"plain": [], "clipped": [], "skorch": [], "estimator": []}
            for _ in range(repeats):
                times["plain"].append(plain_seconds_per_update(batches, args.clock, optimizer))
                if optimizer == "sgd":
                    times["skorch"].append(skorch_seconds_per_update(batches, args.clock))
                else:
                    times["clipped"].append(plain_seconds_per_update(batches, args.clock))
                times["estimator"].append(
                    estimator_seconds_per_update(batches, optimizer, args.readout, args.clock))
            ms = {name: 1e3 * statistics.median(values) for name, values in times.items() if values}
            skorch = (f"{ms['skorch']:7.2f} {ms['skorch'] / ms['plain']:6.2f}" if "skorch" in ms
                      else f"{'':7} {'':6}")
            versus = f"{ms['estimator'] / ms['clipped']:11.2f}" if "clipped" in ms else ""
            print(f"{length:4d} {optimizer:9} {ms['plain']:8.2f} {ms['estimator']:12.2f} "
                  f"{ms['estimator'] / ms['plain']:7.2f} {skorch} {versus}".rstrip())
    print(f"load average {os.getloadavg()[0]:.1f} at the end")


def worker_estimator_seconds(length: int, updates: int, optimizer: str, readout: str, clock: str) -> float:
    """:func:`estimator_seconds_per_update` on the stream of :func:`main`, in a worker."""
    return estimator_seconds_per_update(stream(length, updates), optimizer, readout, clock)


def compare(args: argparse.Namespace, updates: int, repeats: int) -> None:
    """Plain loop, the baseline's partial_fit and this checkout's, alternating."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    versions = {"before": Worker(__file__, args.baseline, args.threads),
                "after": Worker(__file__, root, args.threads)}
    print(f"machine: {machine('cpu', args.threads)}, load average {os.getloadavg()[0]:.1f} at the start")
    for name, worker in versions.items():
        print(f"{name}: {worker.package}")
    print(f"temporal order, batch {BATCH}, {HIDDEN} tanh units, readout={args.readout!r}, "
          f"{updates} updates per run, {repeats} repeats, median ms per update ({args.clock} clock)")
    print(f"{'T':>4} {'optimizer':9} {'plain':>7} {'before':>7} {'after':>7} {'before/plain':>13} {'after/plain':>12}")
    for length in args.length:
        batches = stream(length, updates)
        for optimizer in args.optimizer:
            plain_seconds_per_update(batches[:3], optimizer=optimizer)  # warm-ups
            for worker in versions.values():
                worker.call("estimator", length=length, updates=2, optimizer=optimizer,
                            readout=args.readout, clock=args.clock)
            times: dict[str, list[float]] = {"plain": [], "before": [], "after": []}
            for _ in range(repeats):
                times["plain"].append(plain_seconds_per_update(batches, args.clock, optimizer))
                for name, worker in versions.items():
                    times[name].append(worker.call("estimator", length=length, updates=updates,
                                                   optimizer=optimizer, readout=args.readout,
                                                   clock=args.clock))
            ms = {name: 1e3 * statistics.median(values) for name, values in times.items()}
            print(f"{length:4d} {optimizer:9} {ms['plain']:7.2f} {ms['before']:7.2f} {ms['after']:7.2f} "
                  f"{ms['before'] / ms['plain']:13.2f} {ms['after'] / ms['plain']:12.2f}")
    print(f"load average {os.getloadavg()[0]:.1f} at the end")
    for worker in versions.values():
        worker.close()


if __name__ == "__main__":
    main()
