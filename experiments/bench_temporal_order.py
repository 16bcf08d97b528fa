"""Temporal order at length 50: the simplex method against clipped SGD, through the estimator.

Settings of the reference run (a small implementation outside the package solved this
task in 13,000 updates, while clipped SGD stayed at chance after 34,000): 50 tanh units,
spectral radius 1.2, learning rate 0.01, clipping threshold 1, switching threshold 0.9,
batches of 100 fresh sequences per update (``partial_fit``), success when the error on
10,000 validation sequences drawn once is below 1%, checked every 200 updates.

Usage: ``python -m experiments.bench_temporal_order [--length 50] [--max-updates 34000]
[--seeds 0] [--optimizers simplex sgd] [--out runs.json]``. Prints one line per run.
Training goes through the streaming helper shared with the experiments of issue 5
(:mod:`experiments._stream`).
"""

from __future__ import annotations

import argparse

from experiments._stream import (
    RunSpec,
    check_output_path,
    finite_float,
    nonnegative_int,
    positive_float,
    positive_int,
    run_all,
    set_threads,
    train_on_stream,
)


def run(optimizer: str, length: int, seed: int, max_updates: int, check_every: int,
        learning_rate: float = 0.01, switch_threshold: float | None = 0.9,
        verbose: bool = False) -> dict:
    """One run through the shared streaming helper (``experiments/_stream.py``).

    The validation set (10,000 sequences) is scored in full at every check, as this
    benchmark always did; ``switch_threshold`` applies to the simplex only.
    """
    spec = _spec(optimizer, length, seed, max_updates, check_every, learning_rate,
                 switch_threshold)
    _, record = train_on_stream(spec, verbose=verbose, print_fn=lambda line: print(line, flush=True))
    return record


def _spec(optimizer: str, length: int, seed: int, max_updates: int, check_every: int,
          learning_rate: float, switch_threshold: float | None) -> RunSpec:
    return RunSpec(
        "temporal_order", length, optimizer, seed, learning_rate=learning_rate,
        switch_threshold=switch_threshold if optimizer == "simplex" else None,
        spectral_radius=1.2, max_updates=max_updates, check_every=check_every, n_screen=None,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--length", type=positive_int, default=50)
    parser.add_argument("--max-updates", type=positive_int, default=34_000)
    parser.add_argument("--seeds", type=nonnegative_int, nargs="+", default=[0])
    parser.add_argument("--optimizers", nargs="+", default=["simplex", "sgd"], choices=["sgd", "simplex"])
    parser.add_argument("--check-every", type=positive_int, default=200)
    parser.add_argument("--threads", type=positive_int, default=2)
    parser.add_argument("--learning-rate", type=positive_float, default=0.01)
    parser.add_argument("--switch-threshold", type=finite_float, default=0.9,
                        help="psi; a negative value means None (never switch)")
    parser.add_argument("--verbose", action="store_true", help="print every validation check")
    parser.add_argument("--out", default=None,
                        help="also save every run (settings, result, validation curve) to this "
                        "JSON file, with a CSV table beside it; runs already there are skipped")
    args = parser.parse_args()
    if args.out is not None:
        check_output_path(args.out, folder=False)
    set_threads(args.threads)
    psi = None if args.switch_threshold < 0 else args.switch_threshold
    print(f"temporal order, length {args.length}, lr {args.learning_rate}, psi "
          f"{psi}, {args.threads} threads")
    specs = [
        _spec(optimizer, args.length, seed, args.max_updates, args.check_every,
              args.learning_rate, psi)
        for seed in args.seeds
        for optimizer in args.optimizers
    ]
    if args.out is not None:
        run_all(specs, args.out, meta={"benchmark": "bench_temporal_order"},
                verbose=args.verbose, print_fn=lambda line: print(line, flush=True))
        return
    for spec in specs:
        r = run(spec.optimizer, spec.length, spec.seed, spec.max_updates, spec.check_every,
                spec.learning_rate, spec.switch_threshold, args.verbose)
        print(f"{r['optimizer']:8s} seed {r['seed']}: {'solved' if r['solved'] else 'NOT solved'} "
              f"after {r['updates']} updates, validation error {r['error']:.4f}, "
              f"{r['seconds']:.0f} s", flush=True)


if __name__ == "__main__":
    main()
