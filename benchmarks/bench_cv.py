"""The PBC grid search three ways: RNNGridSearchCV against GridSearchCV(n_jobs=2) and (n_jobs=1).

A benchmark of the stacked trainer's internals: it imports the private
``sklearn_rnn._stacked``, whose parts no public estimator runs alone (the public
entry is :class:`~sklearn_rnn.RNNGridSearchCV`); the networks it times are the
public estimators' own.

Issue 21: a cross-validated grid of 4 settings (``spectral_radius`` x
``clip_threshold``) x 8 folds on the PBC death cohort (1 year, 1 year, 2 visits: 208
patients), each network the clinical study's RNN with time gaps (a
:class:`~sklearn_rnn.SequenceStandardScaler` then an :class:`~sklearn_rnn.RNNClassifier`
with ``time_feature=0`` and the 'decay' cell, every setting that matters written out
here), scored by ROC AUC. The same search is run by :class:`~sklearn_rnn.RNNGridSearchCV`
(every network trained together in one process with one torch thread; also with
``n_jobs=2``, two stacks of 16 in two worker processes, and with ``--two-threads``
one stack on two torch threads), by :class:`~sklearn.model_selection.GridSearchCV`
with ``n_jobs=2`` and with ``n_jobs=1``, side by side in one process, without the refit
(the same single fit in all three); joblib's pool of worker processes, which both
``n_jobs=2`` searches reuse, is started before any timing. It prints the wall-clock times and their ratios,
whether the three chose the same setting, and the largest difference of their
``cv_results_`` scores.

Then the per-update cost: the stacked trainer with 16 networks (4 settings x 4 folds)
against 1 network, and against the ordinary ``RNNClassifier.fit`` of one network, each
for a fixed number of epochs (no stopping rule), as milliseconds per update, of wall-clock
time and of this process's CPU time, both with each network's preparation (validation,
encoding, building it) as its ``fit`` pays it, and as ``loop``: the time of the training
alone (the stacked trainer's call; the fit's from skorch's ``on_train_begin`` to
``on_train_end``, taken by a callback), the cost of an update that a longer fit repeats
(``--skip-grid``: only this).

Usage: ``python benchmarks/bench_cv.py [--max-iter 200] [--epochs 10] [--threads 1]
[--skip-serial] [--rounds 1] [--repeats 5] [--skip-grid] [--two-threads] [--nested] [--cell decay]
[--optimizer adam] [--device cpu]``; ``--cell`` and ``--optimizer`` change the networks of the grid and
of the per-update timing (the study's are 'decay' and 'adam'; the thesis' are 'tanh' and
'sgd', its clipped step rule, or 'simplex', its method, then with the gaps as an
ordinary input); ``--nested``
runs only the clinical study's nested search (pooled 8-fold cross-validation of an
inner 3-fold search over its grid) with RNNGridSearchCV and with GridSearchCV. Prints ``uptime`` before and after: timings on a shared machine are
noisy, the ratios measured side by side less so.
"""

from __future__ import annotations

import argparse
import subprocess
import time
import warnings

import numpy as np
import torch
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import GridSearchCV, StratifiedKFold
from sklearn.pipeline import make_pipeline
from skorch.callbacks import Callback

from sklearn_rnn import RNNClassifier, RNNGridSearchCV, SequenceStandardScaler
from sklearn_rnn._stacked import StackedMember, train_stacked
from sklearn_rnn.clinical import PBCStudy, load_pbc_cohort, pooled_cross_validate, study_models

GRID = {"rnnclassifier__spectral_radius": [0.9, 1.2], "rnnclassifier__clip_threshold": [1.0, 5.0]}


#: The cell, optimizer and device of every network (``--cell``, ``--optimizer``, ``--device``).
SETUP = {"cell": "decay", "optimizer": "adam", "device": "cpu"}


def study_rnn(max_iter: int) -> object:
    """The study's RNN with time gaps, every setting that matters written out."""
    return make_pipeline(
        SequenceStandardScaler(),
        RNNClassifier(
            cell=SETUP["cell"], time_feature=0, hidden_size=50, num_layers=1, optimizer=SETUP["optimizer"],
            learning_rate=0.01, batch_size=32, max_iter=max_iter, early_stopping=False,
            n_iter_no_change=10, tol=1e-4, alpha=10.0, spectral_radius=1.2, clip_threshold=1.0,
            device=SETUP["device"], random_state=0,
        ),
    )


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def timed(search: object, X: list, y: np.ndarray, threads: int) -> float:
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    start = time.perf_counter()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            search.fit(X, y)
    finally:
        torch.set_num_threads(before)
    return time.perf_counter() - start


def _import_in_worker() -> str:
    import sklearn_rnn  # noqa: F401

    return torch.__version__


def warm_workers(n_jobs: int = 2) -> None:
    """Start joblib's worker processes (the pool GridSearchCV and RNNGridSearchCV reuse)
    and import torch and sklearn_rnn in them."""
    from joblib import Parallel, delayed

    start = time.perf_counter()
    Parallel(n_jobs=n_jobs)(delayed(_import_in_worker)() for _ in range(2 * n_jobs))
    print(f"worker processes started and warmed in {time.perf_counter() - start:.1f} s", flush=True)


def compare_searches(
    X: list, y: np.ndarray, max_iter: int, skip_serial: bool, rounds: int, two_threads: bool
) -> None:
    cv = StratifiedKFold(8, shuffle=True, random_state=0)
    common = {"scoring": "roc_auc", "cv": cv, "refit": False}
    # name -> (search, torch threads of this process while it runs)
    searches = {
        "RNNGridSearchCV": (RNNGridSearchCV(study_rnn(max_iter), GRID, **common), 1),
        "RNNGridSearchCV(n_jobs=2)": (RNNGridSearchCV(study_rnn(max_iter), GRID, n_jobs=2, **common), 1),
        "GridSearchCV(n_jobs=2)": (GridSearchCV(study_rnn(max_iter), GRID, n_jobs=2, **common), 1),
    }
    if two_threads:  # both cores for one stack; on a busy machine threads contend badly
        searches["RNNGridSearchCV, 2 threads"] = (RNNGridSearchCV(study_rnn(max_iter), GRID, **common), 2)
    if not skip_serial:
        searches["GridSearchCV(n_jobs=1)"] = (GridSearchCV(study_rnn(max_iter), GRID, n_jobs=1, **common), 1)
    # The searches with n_jobs=2 share joblib's pool of worker processes: start it (and
    # import torch and the package in its workers) before timing, so that neither search
    # pays the pool's start and the one timed first is not the one that does.
    warm_workers()
    # Rounds alternate the searches, so that a change of the machine's load hits all of them.
    times: dict[str, list[float]] = {name: [] for name in searches}
    for round_ in range(rounds):
        for name, (search, threads) in searches.items():
            times[name].append(timed(search, X, y, threads))
            print(f"round {round_ + 1}: {name:26s} {times[name][-1]:8.1f} s   ({uptime()})", flush=True)
    seconds = {name: float(np.median(values)) for name, values in times.items()}
    for ours in [name for name in seconds if name.startswith("RNN")]:
        for name, value in seconds.items():
            if name.startswith("GridSearchCV"):
                print(f"speed-up of {ours} over {name} (median of {rounds}): {value / seconds[ours]:.2f}x")
    stacked = searches["RNNGridSearchCV"][0].cv_results_
    for name, (search, _) in searches.items():
        if name == "RNNGridSearchCV":
            continue
        results = search.cv_results_
        keys = [key for key in results if key.endswith("test_score") and not key.startswith("rank")]
        worst = max(float(np.max(np.abs(stacked[key] - results[key]))) for key in keys)
        same = stacked["params"][int(np.argmin(stacked["rank_test_score"]))] == results["params"][
            int(np.argmin(results["rank_test_score"]))]
        print(f"against {name}: same best setting {same}; largest |score difference| {worst:.2e}")
    print("mean test AUC per setting (stacked):", np.round(stacked["mean_test_score"], 4).tolist())
    print("params:", stacked["params"])


class LoopClock(Callback):
    """The wall-clock and CPU time of a fit's training loop, without its preparation."""

    def on_train_begin(self, net: object, **kwargs: object) -> None:
        self.started = (time.perf_counter(), time.process_time())

    def on_train_end(self, net: object, **kwargs: object) -> None:
        self.wall = time.perf_counter() - self.started[0]
        self.cpu = time.process_time() - self.started[1]


def prepared_members(X: list, y: np.ndarray, count: int, epochs: int) -> tuple[list[StackedMember], int]:
    """``count`` networks of the grid (4 settings x the first 4 of 8 folds), each
    prepared by its estimator as ``fit`` prepares it, for ``epochs`` epochs without a
    stopping rule; and the updates the longest of them makes."""
    folds = list(StratifiedKFold(8, shuffle=True, random_state=0).split(X, y))[:4]
    chosen, updates = [], 0
    for radius in (0.9, 1.2):
        for tau in (1.0, 5.0):
            for train, _ in folds:
                if len(chosen) == count:
                    break
                model = clone(study_rnn(epochs)).set_params(
                    rnnclassifier__spectral_radius=radius, rnnclassifier__clip_threshold=tau,
                    rnnclassifier__n_iter_no_change=epochs + 1,
                )
                X_train = model[:-1].fit_transform([X[i] for i in train], y[train])
                rnn = model[-1]
                data, valid = rnn._prepare(X_train, y[train], None, incremental=False)
                chosen.append(StackedMember(rnn, data, valid))
                updates = max(updates, -(-len(data) // rnn.batch_size))
    return chosen, updates * epochs


def per_update(X: list, y: np.ndarray, epochs: int, repeats: int) -> None:
    """Milliseconds per update: 16 stacked networks, 1 stacked network, one plain fit."""
    folds = list(StratifiedKFold(8, shuffle=True, random_state=0).split(X, y))[:4]

    def members(count: int) -> tuple[list[StackedMember], int]:
        return prepared_members(X, y, count, epochs)

    def stacked(count: int) -> tuple[float, float, float, float]:
        start, cpu = time.perf_counter(), time.process_time()  # preparation included, as in fit
        chosen, updates = members(count)
        loop, loop_cpu = time.perf_counter(), time.process_time()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            train_stacked(chosen)
        end = time.perf_counter()
        return (1000 * (end - start) / updates, 1000 * (time.process_time() - cpu) / updates,
                1000 * (end - loop) / updates, 1000 * (time.process_time() - loop_cpu) / updates)

    def plain() -> tuple[float, float, float, float]:
        train = folds[0][0]
        model = clone(study_rnn(epochs)).set_params(
            rnnclassifier__n_iter_no_change=epochs + 1, rnnclassifier__callbacks=[("clock", LoopClock())]
        )
        start, cpu = time.perf_counter(), time.process_time()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            model.fit([X[i] for i in train], y[train])
        updates = epochs * -(-len(train) // 32)
        clock = dict(model[-1].net_.callbacks_)["clock"]  # the fitted net's copy
        return (1000 * (time.perf_counter() - start) / updates, 1000 * (time.process_time() - cpu) / updates,
                1000 * clock.wall / updates, 1000 * clock.cpu / updates)

    stacked(1)  # warm-up: first calls pay one-time costs
    # Wall-clock and CPU time of this process (one thread): on a shared machine the CPU
    # time leaves out the time this process waited for a core.
    samples: dict[str, list[tuple[float, ...]]] = {"1 stacked": [], "16 stacked": [], "fit": []}
    for _ in range(repeats):  # interleaved, so that load changes hit all three
        samples["1 stacked"].append(stacked(1))
        samples["16 stacked"].append(stacked(16))
        samples["fit"].append(plain())
    for clock, column in (("wall", 0), ("cpu", 1), ("loop wall", 2), ("loop cpu", 3)):
        values = {name: [sample[column] for sample in runs] for name, runs in samples.items()}
        for name, runs in values.items():
            print(f"{clock} {name:10s}: min {min(runs):6.2f}, median {np.median(runs):6.2f} ms per update "
                  f"(runs: {np.round(runs, 2).tolist()})")
        for label, pick in (("min", min), ("median", np.median)):
            best = {name: float(pick(runs)) for name, runs in values.items()}
            print(f"{clock} {label}: 16 stacked / 1 stacked {best['16 stacked'] / best['1 stacked']:.2f}x; "
                  f"16 stacked / one RNNClassifier.fit {best['16 stacked'] / best['fit']:.2f}x")
    print(f"({uptime()})", flush=True)


def nested(X: list, y: np.ndarray) -> None:
    """The clinical study's nested search (PBCStudy._nested_search) both ways.

    The study's own model (``study_models()["RNN time gaps"]``, at the estimator's
    defaults), its grid (``PBCStudy().search_grid``) and inner 3-fold search, inside the
    pooled 8-fold cross-validation: 8 x 4 x 3 = 96 inner fits and 8 refits.
    """
    rnn = study_models(0)["RNN time gaps"]
    step = rnn.steps[-1][0]
    grid = {f"{step}__{name}": values for name, values in PBCStudy().search_grid.items()}
    inner = StratifiedKFold(3, shuffle=True, random_state=0)
    results = {}
    for search in (RNNGridSearchCV(rnn, grid, scoring="roc_auc", cv=inner),
                   GridSearchCV(rnn, grid, scoring="roc_auc", cv=inner)):
        name = type(search).__name__
        start = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            results[name] = pooled_cross_validate(search, X, y, n_splits=8, random_state=0)
        seconds = time.perf_counter() - start
        print(f"nested search with {name:16s}: {seconds:7.1f} s, pooled AUC "
              f"{results[name].mean_pooled_auc:.4f}   ({uptime()})", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--max-iter", type=int, default=200)
    parser.add_argument("--epochs", type=int, default=10, help="epochs of the per-update timing")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--skip-serial", action="store_true", help="leave out GridSearchCV(n_jobs=1)")
    parser.add_argument("--rounds", type=int, default=1, help="alternating rounds of the searches")
    parser.add_argument("--two-threads", action="store_true",
                        help="also RNNGridSearchCV with 2 torch threads (slow on a busy machine)")
    parser.add_argument("--nested", action="store_true",
                        help="only the clinical study's nested search, both ways")
    parser.add_argument("--repeats", type=int, default=5, help="interleaved runs of the per-update timing")
    parser.add_argument("--skip-grid", action="store_true", help="only the per-update timing")
    parser.add_argument("--cell", default="decay",
                        help="the networks' cell: 'decay' (the study's), 'tanh' (the thesis'), 'relu', "
                             "'gru' or 'lstm'")
    parser.add_argument("--optimizer", default="adam", choices=["adam", "sgd", "simplex"],
                        help="'adam' (the study's), 'sgd' (the thesis' clipped step rule) or "
                             "'simplex' (the thesis' method; not with 'decay')")
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"],
                        help="where every network trains (the issue's numbers: 'cpu')")
    args = parser.parse_args()
    SETUP.update(cell=args.cell, optimizer=args.optimizer, device=args.device)
    torch.set_num_threads(args.threads)
    cohort = load_pbc_cohort(1, 1, 2)
    X, y = cohort.sequences, np.asarray(cohort.y)
    print(f"PBC cohort: {len(y)} patients, {int(y.sum())} deaths; torch threads {args.threads}; "
          f"cell={args.cell!r}, optimizer={args.optimizer!r}, device={args.device!r}")
    print(f"load before: {uptime()}", flush=True)
    if args.nested:
        nested(X, y)
        return
    per_update(X, y, args.epochs, args.repeats)
    if args.skip_grid:
        return
    compare_searches(X, y, args.max_iter, args.skip_serial, args.rounds, args.two_threads)


if __name__ == "__main__":
    main()
