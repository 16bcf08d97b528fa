"""Thesis figures 3.1-3.3: temporal-gradient norms and cosines, at initialization and after training.

For each task (temporal order, addition) and each spectral radius of the initial
recurrent matrix (0.8, 0.9, 1.0, 1.1, 1.2 by default), this script measures on one fixed
batch of 100 sequences the norm of every step's temporal gradient and its cosine with
the full gradient (:func:`sklearn_rnn.diagnostics.temporal_gradient_norms`), once on the
freshly initialized estimator and once after ``--updates`` clipped-SGD updates on fresh
batches (the shared streaming helper, :mod:`_stream`). The figures are drawn with
:func:`sklearn_rnn.diagnostics.plot_temporal_gradient_norms`:

* ``figure_3_1.png``: temporal order, norms at initialization, one line per radius;
* ``figure_3_2.png``: both tasks (columns), norms and cosines (rows), at initialization;
* ``figure_3_3.png``: the same after training.

Usage::

    python -m experiments.figures_3            # full: T = 100, 300 updates
    python -m experiments.figures_3 --quick    # seconds
    python -m experiments.figures_3 --plot-only [--out DIR]

Results go to ``figures_3.json`` in the output folder (default
``experiments/results``).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from experiments._stream import (
    TASKS,
    RunSpec,
    add_common_arguments,
    machine_info,
    make_estimator,
    nonnegative_int,
    output_folder,
    positive_float,
    positive_int,
    rst_table,
    set_threads,
    train_on_stream,
)

from sklearn_rnn.diagnostics import (
    TemporalGradientNorms,
    plot_temporal_gradient_norms,
    temporal_gradient_norms,
)

DEFAULT_OUT = str(Path(__file__).resolve().parent / "results")
RESULTS_NAME = "figures_3.json"
TASK_ORDER = ("temporal_order", "addition")


def measure(
    length: int,
    radii: tuple[float, ...],
    updates: int,
    *,
    learning_rate: float = 0.05,
    n_diagnostic: int = 100,
    seed: int = 0,
    verbose: bool = False,
) -> dict[str, Any]:
    """Temporal-gradient statistics at initialization and after ``updates`` updates.

    Parameters
    ----------
    length : int
        Minimal sequence length of both tasks.
    radii : tuple of float
        Spectral radii of the initial recurrent matrix.
    updates : int
        Clipped-SGD updates (batches of 100 fresh sequences) between the two snapshots.
    learning_rate : float, default=0.05
        The step ``mu``.
    n_diagnostic : int, default=100
        Sequences in the fixed diagnostic batch (the thesis used a hundred).
    seed : int, default=0
        Seed of the networks and the training streams; the diagnostic batch uses
        ``seed + 1``.
    verbose : bool, default=False
        Print progress.

    Returns
    -------
    dict
        ``snapshots``: one entry per task, radius and stage (``"init"``, ``"trained"``)
        with the steps, norms, cosines, counts, gradient norm and loss; ``training``:
        the streaming record of each training run (its validation error on 1,000
        sequences after ``updates`` updates).
    """
    snapshots, training = [], []
    for task in TASK_ORDER:
        generator, _ = TASKS[task]
        X, y = generator(n_diagnostic, length, random_state=seed + 1)
        for rho in radii:
            spec = RunSpec(
                task, length, "sgd", seed, learning_rate=learning_rate, spectral_radius=rho,
                max_updates=updates, check_every=updates, n_validation=1000, n_screen=None,
            )
            start = time.perf_counter()
            stats = {"init": temporal_gradient_norms(make_estimator(spec), X, y)}
            model, record = train_on_stream(spec)
            stats["trained"] = temporal_gradient_norms(model, X, y)
            record.pop("curve")
            training.append(record)
            for stage, s in stats.items():
                snapshots.append(
                    {
                        "task": task,
                        "spectral_radius": rho,
                        "stage": stage,
                        "updates": 0 if stage == "init" else updates,
                        "steps": s.steps.tolist(),
                        "norms": s.norms.tolist(),
                        "cosines": [None if np.isnan(c) else c for c in s.cosines.tolist()],
                        "counts": s.counts.tolist(),
                        "gradient_norm": s.gradient_norm,
                        "loss": s.loss,
                        "alignment": s.alignment,
                    }
                )
            if verbose:
                print(
                    f"{task} rho {rho}: first/last step norm at init "
                    f"{stats['init'].norms[0] / stats['init'].norms[-1]:.3g}, after {updates} "
                    f"updates {stats['trained'].norms[0] / stats['trained'].norms[-1]:.3g} "
                    f"(validation error {record['error']:.3f}, {time.perf_counter() - start:.0f} s)",
                    flush=True,
                )
    return {"snapshots": snapshots, "training": training}


def _as_stats(snapshot: dict[str, Any]) -> TemporalGradientNorms:
    """A saved snapshot back as the diagnostics' result type (for its plotting helper)."""
    return TemporalGradientNorms(
        steps=np.asarray(snapshot["steps"]),
        norms=np.asarray(snapshot["norms"], dtype=float),
        cosines=np.asarray([np.nan if c is None else c for c in snapshot["cosines"]], dtype=float),
        parameter_norms={},
        counts=np.asarray(snapshot["counts"]),
        gradient_norm=snapshot["gradient_norm"],
        loss=snapshot["loss"],
        alignment=snapshot["alignment"],
    )


def _select(results: dict[str, Any], task: str, stage: str) -> dict[str, TemporalGradientNorms]:
    return {
        f"rho = {s['spectral_radius']}": _as_stats(s)
        for s in results["snapshots"]
        if s["task"] == task and s["stage"] == stage
    }


def plot(results: dict[str, Any], figure: str = "3.2") -> Any:
    """Draw figure 3.1, 3.2 or 3.3 from saved results.

    Parameters
    ----------
    results : dict
        The content of ``figures_3.json``.
    figure : {"3.1", "3.2", "3.3"}
        3.1: temporal order norms at initialization; 3.2: both tasks, norms and
        cosines, at initialization; 3.3: the same after training.

    Returns
    -------
    matplotlib.figure.Figure
    """
    import matplotlib.pyplot as plt

    length = results["length"]
    if figure == "3.1":
        ax = plot_temporal_gradient_norms(
            _select(results, "temporal_order", "init"),
            title=f"Figure 3.1: temporal order, T = {length}, at initialization",
        )
        return ax.figure
    if figure not in ("3.2", "3.3"):
        raise ValueError(f"figure must be '3.1', '3.2' or '3.3'; got {figure!r}.")
    stage = "init" if figure == "3.2" else "trained"
    when = "at initialization" if stage == "init" else f"after {results['updates']} updates"
    fig, axes = plt.subplots(2, 2, figsize=(10, 6), sharex=True, squeeze=False)
    for column, task in enumerate(TASK_ORDER):
        plot_temporal_gradient_norms(
            _select(results, task, stage), cosines=True, ax=axes[:, column],
            title=f"{task.replace('_', ' ')}, T = {length}",
        )
    fig.suptitle(f"Figure {figure}: temporal gradients {when}")
    fig.tight_layout()
    return fig


def summary_table(results: dict[str, Any]) -> str:
    """Per task and radius: how much the first step's gradient norm falls below the last's.

    Returns
    -------
    str
        A reStructuredText table (the docs include it).
    """
    by_key = {(s["task"], s["spectral_radius"], s["stage"]): s for s in results["snapshots"]}
    training = {(r["task"], r["spectral_radius"]): r for r in results["training"]}
    rows = []
    for (task, rho), record in training.items():
        init, trained = by_key[task, rho, "init"], by_key[task, rho, "trained"]
        rows.append([
            task.replace("_", " "), rho,
            f"{init['norms'][0] / init['norms'][-1]:.2e}",
            f"{trained['norms'][0] / trained['norms'][-1]:.2e}",
            f"{init['gradient_norm']:.3g}", f"{trained['gradient_norm']:.3g}",
            f"{record['error']:.3f}", f"{record['seconds']:.0f}",
        ])
    header = ["task", "rho", "first/last norm, init",
              f"first/last norm, {results['updates']} updates", "gradient norm, init",
              f"gradient norm, {results['updates']} updates", "validation error (1,000)",
              "seconds"]
    return rst_table(rows, header)


def save_figures(results: dict[str, Any], out: Path) -> list[Path]:
    """Write ``figure_3_1.png``, ``figure_3_2.png`` and ``figure_3_3.png`` to ``out``."""
    import matplotlib.pyplot as plt

    paths = []
    for figure in ("3.1", "3.2", "3.3"):
        fig = plot(results, figure)
        path = out / f"figure_{figure.replace('.', '_')}.png"
        fig.savefig(path, dpi=90, bbox_inches="tight")
        plt.close(fig)
        paths.append(path)
    return paths


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Command line: measure (unless ``--plot-only``), save the results, draw the figures."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_common_arguments(parser, DEFAULT_OUT)
    parser.add_argument("--length", type=positive_int, default=None, help="default 100 (quick: 20)")
    parser.add_argument("--updates", type=positive_int, default=None, help="default 300 (quick: 20)")
    parser.add_argument("--radii", type=positive_float, nargs="+", default=None,
                        help="default 0.8 0.9 1.0 1.1 1.2 (quick: 0.8 1.2)")
    parser.add_argument("--learning-rate", type=positive_float, default=0.05)
    parser.add_argument("--seed", type=nonnegative_int, default=0)
    args = parser.parse_args(argv)
    out = output_folder(args, DEFAULT_OUT)
    path = out / RESULTS_NAME
    if args.merge:
        raise SystemExit("--merge applies to figure_4_1.py and table_4_1.py (runs by seed).")
    if args.time_budget is not None:
        raise SystemExit("--time-budget applies to figure_4_1.py and table_4_1.py (runs that "
                         "train until success); this script does a fixed number of updates.")
    if args.plot_only:
        if not path.exists():
            raise SystemExit(f"--plot-only: no results at {path}; run without --plot-only first.")
        results = json.loads(path.read_text())
    else:
        set_threads(args.threads)
        length = args.length if args.length is not None else (20 if args.quick else 100)
        updates = args.updates if args.updates is not None else (20 if args.quick else 300)
        radii = tuple(args.radii or ((0.8, 1.2) if args.quick else (0.8, 0.9, 1.0, 1.1, 1.2)))
        settings = {"mode": "quick" if args.quick else "full", "length": length, "updates": updates,
                    "radii": list(radii), "learning_rate": args.learning_rate, "seed": args.seed}
        if path.exists():  # the shipped results, which the docs include, are not replaced by others
            earlier = {key: json.loads(path.read_text()).get(key) for key in settings}
            if earlier != settings:
                raise SystemExit(
                    f"{path} holds results of other settings ({earlier}; this run: {settings}): "
                    "write these elsewhere with --out DIR, or delete that file to replace it."
                )
        start = time.perf_counter()
        measured = measure(length, radii, updates, learning_rate=args.learning_rate,
                           seed=args.seed, verbose=args.verbose or not args.quick)
        results = {
            "command": " ".join(["python", "-m", "experiments.figures_3", *(argv or sys.argv[1:])]),
            "mode": "quick" if args.quick else "full",
            "length": length, "updates": updates, "radii": list(radii),
            "learning_rate": args.learning_rate, "seed": args.seed, "optimizer": "sgd",
            "seconds": round(time.perf_counter() - start, 1),
            "machine": machine_info(),
            **measured,
        }
        out.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(results, indent=1))
    (out / "figures_3_runs.rst").write_text(summary_table(results))
    for figure in save_figures(results, out):
        print(f"wrote {figure}")
    return results


if __name__ == "__main__":
    main()
