"""Thesis table 4.1: updates to convergence of the anti-gradient, simplex, and simplex with switching.

Three methods of the thesis' section 4.1.2, each through the estimators' ``optimizer``:

* ``sgd``: clipped SGD, the anti-gradient;
* ``simplex``: the simplex direction without switching (``switch_threshold=None``);
* ``simplex-switch``: the simplex direction switching to the anti-gradient when the
  gradient norm exceeds psi (0.5 for addition, 0.9 for temporal order, as in the thesis;
  addition trains on standardized targets, so there psi and the clipping threshold act
  on gradients about 1 / std(y) = 4.9 times the thesis' squared error's, see
  docs/user_guide/experiments.rst).

Each run trains 50 tanh units (the thesis' network; ``--cell`` picks another of the
estimators' cells), spectral radius 1.2, clipping threshold 1, batches of 100
fresh sequences through ``partial_fit`` (the shared streaming helper :mod:`_stream`)
until the error on 10,000 validation sequences is below 1% (checked every 200 updates)
or the update cap. A run at the cap is a failure and is reported as such.

Usage::

    python -m experiments.table_4_1                # full: T = 100, seeds 0 1 2
    python -m experiments.table_4_1 --tasks temporal_order --methods simplex-switch \\
        --seeds 0 --max-updates 100000
    python -m experiments.table_4_1 --cell lstm --methods simplex-switch
    python -m experiments.table_4_1 --quick        # seconds
    python -m experiments.table_4_1 --plot-only

Runs already in the results file (same settings) are skipped.
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
    rst_table,
    run_all,
    runs_table,
    set_threads,
    summarize,
)

DEFAULT_OUT = str(Path(__file__).resolve().parent / "results")
RESULTS_NAME = "table_4_1.json"
METHODS = ("sgd", "simplex", "simplex-switch")
TASK_ORDER = ("addition", "temporal_order")
#: psi of the switching variant, by task (thesis / REFERENCE.md).
PSI = {"addition": 0.5, "temporal_order": 0.9}
#: The thesis' mean updates to convergence at T = 100 (3 runs; None: not reported).
THESIS = {
    "addition": {"sgd": 1_807_466, "simplex": 2_338_500, "simplex-switch": 1_630_666},
    "temporal_order": {"sgd": 2_164_800, "simplex": None, "simplex-switch": 1_010_000},
}


def method_of(record: dict[str, Any]) -> str:
    """``'sgd'``, ``'simplex'`` or ``'simplex-switch'`` of a saved run."""
    if record["optimizer"] == "sgd":
        return "sgd"
    return "simplex" if record["switch_threshold"] is None else "simplex-switch"


def specs(
    tasks: tuple[str, ...],
    methods: tuple[str, ...],
    seeds: tuple[int, ...],
    length: int,
    max_updates: int,
    *,
    learning_rate: float,
    cell: str = "tanh",
    check_every: int = 200,
    n_validation: int = 10_000,
    n_screen: int | None = 1000,
) -> list[RunSpec]:
    """One run per task, seed and method, in that order (tasks outermost, then seeds, so
    that within a task every method gets a seed before any gets the next)."""
    unknown = set(methods) - set(METHODS)
    if unknown:
        raise SystemExit(f"unknown methods {sorted(unknown)}; choose from {METHODS}.")
    return [
        RunSpec(
            task, length, "sgd" if method == "sgd" else "simplex", seed,
            learning_rate=learning_rate,
            switch_threshold=PSI[task] if method == "simplex-switch" else None,
            spectral_radius=1.2, max_updates=max_updates, check_every=check_every,
            n_validation=n_validation, n_screen=n_screen, cell=cell,
        )
        for task in tasks
        for seed in seeds
        for method in methods
    ]


def table(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per task, length, cell and method: runs, solved, mean updates of the solved
    runs (a run repeated with a larger cap counts once, with that cap). The thesis' mean
    at length 100 stands beside the thesis' network, the tanh cell, only."""
    rows = summarize([{**r, "method": method_of(r)} for r in final_runs(records)],
                     ["task", "length", "cell", "method", "learning_rate"])
    for row in rows:
        thesis = (THESIS.get(row["task"], {})
                  if row["cell"] == "tanh" and row["length"] == 100 else {})
        row["thesis_mean_updates"] = thesis.get(row["method"])
    return rows


def summary_table(records: list[dict[str, Any]]) -> str:
    """:func:`table` as a reStructuredText table (the docs include the written file)."""
    header = ["task", "T", "cell", "method", "lr", "solved", "mean updates (solved runs)",
              "cap", "thesis (tanh, T = 100)"]
    rows = [
        [
            row["task"].replace("_", " "), row["length"], row["cell"], row["method"],
            row["learning_rate"], f"{row['solved']} of {row['runs']}",
            "" if row["mean_updates_solved"] is None else f"{row['mean_updates_solved']:,.0f}",
            f"{row['max_updates']:,}",
            "" if row["thesis_mean_updates"] is None else f"{row['thesis_mean_updates']:,}",
        ]
        for row in table(records)
    ]
    return rst_table(rows, header)


def plot(records: list[dict[str, Any]]) -> Any:
    """Validation error against updates of every run, one panel per task (as thesis figure 4.2).

    Colours are methods; the line style is the cell, the length and the learning rate
    (solid for the first setting, then dashed, dotted...), and each label names all
    three. Solved runs end in a dot; runs stopped at their cap end in a cross.

    Returns
    -------
    matplotlib.figure.Figure
    """
    import matplotlib.pyplot as plt

    tasks = [t for t in TASK_ORDER if any(r["task"] == t for r in records)]
    fig, axes = plt.subplots(1, len(tasks), figsize=(5.5 * len(tasks), 4), squeeze=False)
    colours = {m: f"C{i}" for i, m in enumerate(METHODS)}
    settings = sorted({(r["cell"], r["length"], r["learning_rate"]) for r in records},
                      key=lambda s: (s[0] != "tanh", s[0], s[1], -s[2]))
    styles = ["-", "--", ":", "-.", (0, (5, 1, 1, 1, 1, 1)), (0, (8, 2)), (0, (1, 4)),
              (0, (4, 2, 1, 2, 1, 2))]
    dashes = dict(zip(settings, styles * len(settings)))
    for ax, task in zip(axes[0], tasks):
        labelled = set()
        for r in (r for r in final_runs(records) if r["task"] == task):
            method = method_of(r)
            curve = r["curve"]
            if not curve:
                continue
            x = [c[0] for c in curve]
            y = [max(c[1], 1e-4) for c in curve]
            name = f"{method}, {r['cell']}, T = {r['length']}, lr {r['learning_rate']:g}"
            label = None if name in labelled else name
            labelled.add(name)
            style = dashes[r["cell"], r["length"], r["learning_rate"]]
            ax.plot(x, y, ls=style, color=colours[method], lw=1, label=label)
            ax.plot(x[-1], y[-1], "o" if r["solved"] else "x", color=colours[method])
        ax.axhline(0.01, color="0.5", ls=":", lw=1)
        ax.set_yscale("log")
        ax.set_xlabel("updates (batches of 100)")
        ax.set_ylabel("validation error")
        ax.set_xscale("log")
        ax.set_title(task.replace("_", " "))
        ax.legend(fontsize="x-small")
    fig.suptitle("Table 4.1 runs: validation error (dot: solved, cross: stopped at the cap)")
    fig.tight_layout()
    return fig


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    """Command line: run what is missing (unless ``--plot-only``), print the table, draw."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_common_arguments(parser, DEFAULT_OUT)
    parser.add_argument("--tasks", nargs="+", default=list(TASK_ORDER), choices=TASK_ORDER)
    parser.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    parser.add_argument("--seeds", type=nonnegative_int, nargs="+", default=None, help="default 0 1 2 (quick: 0)")
    parser.add_argument("--length", type=positive_int, default=None, help="default 100 (quick: 8)")
    parser.add_argument("--max-updates", type=positive_int, default=None,
                        help="update cap per run, default 100000 (quick: 200)")
    parser.add_argument("--learning-rate", type=positive_float, default=0.05)
    parser.add_argument("--cell", default="tanh", choices=("tanh", "relu", "gru", "lstm"),
                        help="the estimators' cell (default: the thesis' tanh network)")
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
        seeds = tuple(args.seeds or ((0,) if args.quick else (0, 1, 2)))
        length = args.length if args.length is not None else (8 if args.quick else 100)
        cap = args.max_updates if args.max_updates is not None else (200 if args.quick else 100_000)
        extra = {"check_every": 50, "n_validation": 1000, "n_screen": None} if args.quick else {}
        command = " ".join(["python", "-m", "experiments.table_4_1",
                            *(sys.argv[1:] if argv is None else argv)])
        start = time.perf_counter()
        run_all(
            specs(tuple(args.tasks), tuple(args.methods), seeds, length, cap,
                  learning_rate=args.learning_rate, cell=args.cell, **extra),
            path, meta={"experiment": "table 4.1", "mode": "quick" if args.quick else "full",
                        "last_command": command},
            verbose=args.verbose, deadline=deadline_of(args),
        )
        print(f"{time.perf_counter() - start:.0f} s")
        records = load_records(path)
    for row in table(records):
        mean = row["mean_updates_solved"]
        print(f"{row['task']} T={row['length']} {row['cell']} {row['method']} "
              f"lr {row['learning_rate']}: "
              f"{row['solved']}/{row['runs']} solved"
              + (f", mean {mean:.0f} updates" if mean is not None else "")
              + f" (cap {row['max_updates']}; thesis {row['thesis_mean_updates']})")
    (out / RESULTS_NAME.replace(".json", "_runs.rst")).write_text(runs_table(records))
    (out / RESULTS_NAME.replace(".json", "_summary.rst")).write_text(summary_table(records))
    import matplotlib.pyplot as plt

    fig = plot(records)
    fig.savefig(out / "table_4_1.png", dpi=90, bbox_inches="tight")
    plt.close(fig)
    print(f"wrote {out / 'table_4_1.png'}")
    return records


if __name__ == "__main__":
    main()
