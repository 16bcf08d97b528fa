"""Thesis figure 4.1: success rate on temporal order against length, spectral radius above or below one.

Clipped SGD (the thesis' anti-gradient, ``optimizer='sgd'``, ``clip_threshold=1``) with
50 tanh units and batches of 100 fresh sequences, trained through ``partial_fit`` by the
shared streaming helper (:mod:`_stream`) until the error on 10,000 validation sequences
is below 1% (checked every 200 updates) or an update cap is reached. Two initial
recurrent matrices: the thesis' spectral initialization with radius 1.2, and the same
Gaussian draw rescaled to radius 0.8 (standing in for the thesis' "standard Gaussian
initialization": a N(0, 0.1^2) matrix of 50 units has radius about 0.7).

A run that hits its cap counts as a failure; the cap of each length is part of the
result and is drawn on the figure.

Usage::

    python -m experiments.figure_4_1                     # full (see --help)
    python -m experiments.figure_4_1 --lengths 10 20 --seeds 0 1 2
    python -m experiments.figure_4_1 --quick             # seconds
    python -m experiments.figure_4_1 --plot-only

Runs already in the results file (same settings) are skipped, so a long job can be
split into several commands and resumed after an interruption.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from experiments._stream import (
    RunSpec,
    add_common_arguments,
    check_merge_sources,
    deadline_of,
    final_runs,
    load_records,
    merge_results,
    nonnegative_int,
    output_folder,
    positive_float,
    positive_int,
    run_all,
    runs_table,
    set_threads,
    summarize,
)

DEFAULT_OUT = str(Path(__file__).resolve().parent / "results")
RESULTS_NAME = "figure_4_1.json"
FULL_LENGTHS = (10, 20, 50, 100, 150, 200)
#: Default update cap by length in full mode (the thesis ran for millions of updates).
FULL_CAPS = {10: 10_000, 20: 10_000, 50: 20_000, 100: 50_000, 150: 50_000, 200: 50_000}
#: The thesis' success rates (REFERENCE.md; 3 runs each, clipped SGD, mu = 1e-3).
THESIS = {
    "rho > 1": {10: 1.0, 20: 1.0, 50: 1.0, 100: 2 / 3, 150: 2 / 3, 200: 0.0},
    "rho < 1": {10: 1.0, 20: 1.0, 50: 0.0, 100: 0.0, 150: 0.0, 200: 0.0},
}


def parse_caps(items: list[str] | None) -> dict[int, int]:
    """``["50:20000", "100:5000"]`` -> ``{50: 20000, 100: 5000}``."""
    caps = {}
    for item in items or []:
        try:
            length, cap = (int(v) for v in item.split(":"))
        except ValueError:
            raise SystemExit(f"--caps takes LENGTH:UPDATES pairs such as 100:50000; got {item!r}.")
        if length < 1 or cap < 1:
            raise SystemExit(f"--caps takes a length and a number of updates of at least 1; got {item!r}.")
        caps[length] = cap
    return caps


def specs(
    lengths: tuple[int, ...],
    radii: tuple[float, ...],
    seeds: tuple[int, ...],
    caps: dict[int, int],
    *,
    learning_rate: float,
    check_every: int = 200,
    n_validation: int = 10_000,
    n_screen: int | None = 1000,
) -> list[RunSpec]:
    """One clipped-SGD temporal-order run per length, radius and seed (in that order)."""
    missing = [length for length in lengths if length not in caps]
    if missing:
        raise SystemExit(f"no update cap for lengths {missing}; give them with --caps L:N.")
    return [
        RunSpec(
            "temporal_order", length, "sgd", seed, learning_rate=learning_rate,
            spectral_radius=rho, max_updates=caps[length], check_every=check_every,
            n_validation=n_validation, n_screen=n_screen,
        )
        for length in lengths
        for rho in radii
        for seed in seeds
    ]


def summary(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Success rate by learning rate, spectral radius and length (:func:`summarize` of
    :func:`final_runs`): runs at different learning rates are never pooled."""
    return summarize(final_runs(records), ["learning_rate", "spectral_radius", "length"])


def plot(records: list[dict[str, Any]], ax: Any = None) -> Any:
    """Success rate against length, one line per spectral radius and learning rate, with
    the thesis' rates.

    Each point is annotated with ``solved/runs`` and the update cap; the thesis' rates
    are drawn dashed. Hollow markers: the cap was below the full-mode cap of that length
    (``FULL_CAPS``). A run repeated with a larger cap counts once, with that cap. Runs at
    different learning rates are separate lines, each labelled with its rate.

    Returns
    -------
    matplotlib.axes.Axes
    """
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(7, 4))
    rows = summary(records)
    # One line per (radius, learning rate): radii from the largest, rates from the largest.
    series = sorted({(r["spectral_radius"], r["learning_rate"]) for r in rows}, reverse=True)
    # Lengths as categories, evenly spaced: the thesis' six and any others that were run.
    lengths = sorted(set(FULL_LENGTHS) | {r["length"] for r in rows})
    x_of = {length: i for i, length in enumerate(lengths)}
    thesis_drawn = set()
    for i, (rho, lr) in enumerate(series):
        mine = sorted((r for r in rows if (r["spectral_radius"], r["learning_rate"]) == (rho, lr)),
                      key=lambda r: r["length"])
        color, shift = f"C{i}", 0.08 * (i - (len(series) - 1) / 2)
        side = "rho > 1" if rho > 1 else "rho < 1"
        if side not in thesis_drawn:  # the thesis' rates once per side of one
            thesis_drawn.add(side)
            thesis = THESIS[side]
            ax.plot([x_of[t] + shift for t in sorted(thesis)], [thesis[t] for t in sorted(thesis)],
                    "--", color=color, alpha=0.5, label=f"thesis, {side}")
        ax.plot([x_of[r["length"]] + shift for r in mine], [r["success_rate"] for r in mine],
                "-", color=color, label=f"sklearn_rnn, rho = {rho}, lr {lr:g}")
        for r in mine:
            # Hollow: capped below the full-mode cap, so a failure there says little.
            short = r["max_updates"] < FULL_CAPS.get(r["length"], 0)
            ax.plot(x_of[r["length"]] + shift, r["success_rate"], "o", color=color,
                    markerfacecolor="white" if short else color)
        for r in mine:
            ax.annotate(f"{r['solved']}/{r['runs']}, cap {r['max_updates'] / 1000:g}k",
                        (x_of[r["length"]] + shift, r["success_rate"]), textcoords="offset points",
                        xytext=(0, 7 + 9 * (i // 2) if i % 2 == 0 else -13 - 9 * (i // 2)),
                        ha="center", fontsize=7, color=color)
    ax.set_xticks(range(len(lengths)), [str(t) for t in lengths])
    ax.set_xlabel("minimal sequence length T")
    ax.set_ylabel("success rate (error < 1%)")
    ax.set_ylim(-0.15, 1.2)
    ax.set_title("Figure 4.1: temporal order, clipped SGD (hollow: cap below full mode)")
    ax.legend(fontsize="small", loc="lower left")
    return ax


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    """Command line: run what is missing (unless ``--plot-only``), then draw the figure."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_common_arguments(parser, DEFAULT_OUT)
    parser.add_argument("--lengths", type=positive_int, nargs="+", default=None,
                        help=f"default {' '.join(map(str, FULL_LENGTHS))} (quick: 5 10)")
    parser.add_argument("--seeds", type=nonnegative_int, nargs="+", default=None, help="default 0 1 2 (quick: 0)")
    parser.add_argument("--radii", type=positive_float, nargs="+", default=[1.2, 0.8])
    parser.add_argument("--caps", nargs="+", default=None, metavar="LENGTH:UPDATES",
                        help="update cap by length, e.g. 100:5000 (defaults: "
                        + ", ".join(f"{k}:{v}" for k, v in FULL_CAPS.items()) + "; quick: 300)")
    parser.add_argument("--learning-rate", type=positive_float, default=0.05)
    args = parser.parse_args(argv)
    check_merge_sources(parser, args.merge, RESULTS_NAME)
    out = output_folder(args, DEFAULT_OUT)
    path = out / RESULTS_NAME
    if args.merge:
        merge_results(args.merge, path)
    if args.plot_only:
        records = load_records(path)
        if not records:
            raise SystemExit(f"--plot-only: no results at {path}; run without --plot-only first.")
    else:
        set_threads(args.threads)
        if args.quick:
            lengths, seeds = tuple(args.lengths or (5, 10)), tuple(args.seeds or (0,))
            caps = {length: 300 for length in lengths}
            extra = {"check_every": 50, "n_validation": 1000, "n_screen": None}
        else:
            lengths, seeds = tuple(args.lengths or FULL_LENGTHS), tuple(args.seeds or (0, 1, 2))
            caps = dict(FULL_CAPS)
            extra = {}
        given = parse_caps(args.caps)
        unused = sorted(set(given) - set(lengths))
        if unused:  # a typo ran the default cap without a word
            raise SystemExit(
                f"--caps names length(s) {unused}, which are not among the lengths run "
                f"({', '.join(map(str, lengths))}): give a cap for a length that runs, or add "
                "the length with --lengths."
            )
        caps.update(given)
        command = " ".join(["python", "-m", "experiments.figure_4_1",
                            *(sys.argv[1:] if argv is None else argv)])
        start = time.perf_counter()
        run_all(
            specs(lengths, tuple(args.radii), seeds, caps, learning_rate=args.learning_rate, **extra),
            path, meta={"experiment": "figure 4.1", "mode": "quick" if args.quick else "full",
                        "last_command": command},
            verbose=args.verbose, deadline=deadline_of(args),
        )
        print(f"{time.perf_counter() - start:.0f} s")
        records = load_records(path)
    for row in summary(records):
        mean = row["mean_updates_solved"]
        print(f"lr {row['learning_rate']:g} rho {row['spectral_radius']} T={row['length']}: "
              f"{row['solved']}/{row['runs']} solved"
              + (f", mean {mean:.0f} updates" if mean is not None else "")
              + f" (cap {row['max_updates']})")
    (out / RESULTS_NAME.replace(".json", "_runs.rst")).write_text(runs_table(records))
    import matplotlib.pyplot as plt

    ax = plot(records)
    ax.figure.savefig(out / "figure_4_1.png", dpi=90, bbox_inches="tight")
    plt.close(ax.figure)
    print(f"wrote {out / 'figure_4_1.png'}")
    return records


if __name__ == "__main__":
    main()
