"""Shared streaming-training helper of the synthetic experiments (thesis section 4.1).

Every experiment of this package (``bench_temporal_order`` included) trains the
same way: an estimator sees an endless stream of fresh batches of a synthetic task
through ``partial_fit`` (one update per batch), its error on a validation set drawn
once is checked every ``check_every`` updates, and the run stops at success (error
below ``target_error``, 1% in the thesis) or at an update cap. :func:`train_on_stream`
does one such run and returns its record; :func:`run_all` runs a list of them one after
the other, appending each finished record to a JSON file (so that an interrupted full
run keeps what it finished and can be resumed with the same command) and a CSV table.

Seeds. For a run with seed ``s`` the network is initialized with ``random_state=s``, the
training stream is ``numpy.random.default_rng(s)`` and the validation set is drawn with
``random_state=10_000 + s`` (the validation set depends on the seed, not on the
optimizer, so runs of different optimizers with the same seed see the same data).
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import platform
import subprocess
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import MISSING, asdict, dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np
import torch

from sklearn_rnn import RNNClassifier, RNNRegressor
from sklearn_rnn.datasets import (
    make_addition,
    make_multiplication,
    make_temporal_order,
    make_xor,
    task_error,
)

__all__ = [
    "TASKS",
    "RunSpec",
    "add_common_arguments",
    "branch_counts",
    "check_merge_sources",
    "check_output_path",
    "deadline_of",
    "final_runs",
    "load_records",
    "machine_info",
    "make_estimator",
    "merge_results",
    "output_folder",
    "rst_table",
    "run_all",
    "runs_table",
    "set_threads",
    "summarize",
    "train_on_stream",
]

#: Each task's generator and whether it is a classification task.
TASKS: dict[str, tuple[Callable[..., Any], bool]] = {
    "addition": (make_addition, False),
    "multiplication": (make_multiplication, False),
    "xor": (make_xor, False),
    "temporal_order": (make_temporal_order, True),
}

#: Offset between a run's seed and the seed of its validation set.
VALIDATION_SEED_OFFSET = 10_000


@dataclass(frozen=True)
class RunSpec:
    """Settings of one streaming run (defaults: the thesis' section 4.1 protocol).

    Parameters
    ----------
    task : {"addition", "multiplication", "xor", "temporal_order"}
        The synthetic task (appendix B).
    length : int
        Minimal sequence length ``T``.
    optimizer : {"sgd", "simplex", "adam"}
        ``"sgd"`` is clipped SGD (the thesis' anti-gradient), ``"simplex"`` the simplex
        direction (with switching when ``switch_threshold`` is set).
    seed : int
        Seed of the initialization, the training stream and the validation set.
    learning_rate : float
        The step ``mu`` of eq. 3.6.
    switch_threshold : float or None
        ``psi`` of algorithm 3.2; None never switches.
    spectral_radius : float or None
        Spectral radius of the initial recurrent matrix; None keeps PyTorch's
        initialization.
    max_updates : int
        Update cap: the run stops there if not solved.
    check_every : int
        Updates between validation checks (200 in the thesis).
    batch_size : int
        Fresh sequences per update.
    hidden_size : int
        Recurrent units.
    cell : {"tanh", "relu", "gru", "lstm"}
        The estimators' ``cell``: the thesis' Elman network is ``"tanh"``.
    clip_threshold : float
        ``tau`` of eq. 3.6.
    n_validation : int
        Size of the validation set (10,000 in the thesis).
    target_error : float
        Success when the validation error is below this (0.01 in the thesis).
    n_screen : int or None
        Screening: at each check, first score only the first ``n_screen`` validation
        sequences, and score all ``n_validation`` only when that error is below
        ``3 * target_error``. Success is always decided on the whole set; screening
        only saves time (a check on 10,000 sequences of length 100 costs about as much
        as 30 updates). None scores the whole set at every check.
    """

    task: str
    length: int
    optimizer: str
    seed: int
    learning_rate: float = 0.05
    switch_threshold: float | None = None
    spectral_radius: float | None = 1.2
    max_updates: int = 100_000
    check_every: int = 200
    batch_size: int = 100
    hidden_size: int = 50
    cell: str = "tanh"
    clip_threshold: float = 1.0
    n_validation: int = 10_000
    target_error: float = 0.01
    n_screen: int | None = 1000

    def __post_init__(self) -> None:
        if self.task not in TASKS:
            raise ValueError(f"task must be one of {sorted(TASKS)}; got {self.task!r}.")
        for name in ("length", "max_updates", "check_every", "batch_size", "n_validation"):
            value = getattr(self, name)
            if not isinstance(value, (int, np.integer)) or value < 1:
                raise ValueError(f"{name} must be a positive int; got {value!r}.")
        if self.n_screen is not None and self.n_screen < 1:
            raise ValueError(f"n_screen must be a positive int or None; got {self.n_screen!r}.")

    def key(self) -> tuple:
        """The settings as a hashable tuple: two runs with the same key are the same run."""
        return tuple(getattr(self, f.name) for f in fields(self))


def positive_int(text: str) -> int:
    """An argparse type for counts and lengths: an integer of at least 1 (a 0 was read
    as "not given" and replaced by the default)."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1; got {value}")
    return value


positive_int.__name__ = "int"  # argparse's "invalid int value: 'x'"


def nonnegative_int(text: str) -> int:
    """An argparse type for seeds: an integer in [0, 2**32 - 1], the estimators' range
    (numpy refuses negative ones, scikit-learn larger ones, after the runs before have
    trained)."""
    value = int(text)
    if not 0 <= value <= 2**32 - 1:
        raise argparse.ArgumentTypeError(f"expected an integer in [0, {2**32 - 1}]; got {value}")
    return value


nonnegative_int.__name__ = "int"


def positive_float(text: str) -> float:
    """An argparse type for learning rates and radii: a finite number above 0 (the
    estimators refuse others, after the run has begun)."""
    value = float(text)
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"expected a finite number > 0; got {value}")
    return value


positive_float.__name__ = "float"


def finite_float(text: str) -> float:
    """An argparse type for a switching threshold: a finite number (negative: never)."""
    value = float(text)
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite number; got {value}")
    return value


finite_float.__name__ = "float"


def set_threads(n_threads: int) -> None:
    """Limit PyTorch (and, for child processes, OpenMP) to ``n_threads`` CPU threads."""
    if n_threads < 1:
        raise ValueError(f"n_threads must be at least 1; got {n_threads}.")
    os.environ["OMP_NUM_THREADS"] = str(n_threads)
    torch.set_num_threads(n_threads)


def machine_info() -> dict[str, Any]:
    """Where a result was measured: code (the package's folder and git commit, or the
    ``SKLEARN_RNN_COMMIT`` environment variable for a copy outside git), CPU, threads,
    library versions."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    import sklearn_rnn

    package = Path(sklearn_rnn.__file__).resolve().parent
    commit = os.environ.get("SKLEARN_RNN_COMMIT")
    if commit is None:
        try:
            commit = subprocess.run(
                ["git", "-C", str(package), "rev-parse", "HEAD"],
                capture_output=True, text=True, check=True,
            ).stdout.strip()
            dirty = subprocess.run(
                ["git", "-C", str(package), "status", "--porcelain", "--", "."],
                capture_output=True, text=True, check=True,
            ).stdout.strip()
            commit += " (with uncommitted changes)" if dirty else ""
        except (OSError, subprocess.CalledProcessError):
            commit = "unknown"
    return {
        "sklearn_rnn": str(package),
        "commit": commit,
        "cpu": cpu,
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "numpy": np.__version__,
        "python": platform.python_version(),
    }


def make_estimator(spec: RunSpec) -> RNNClassifier | RNNRegressor:
    """The estimator of a run: ``hidden_size`` units of ``cell``, clipped steps, batches
    of ``batch_size``."""
    _, classification = TASKS[spec.task]
    cls = RNNClassifier if classification else RNNRegressor
    return cls(
        hidden_size=spec.hidden_size,
        cell=spec.cell,
        spectral_radius=spec.spectral_radius,
        optimizer=spec.optimizer,
        learning_rate=spec.learning_rate,
        clip_threshold=spec.clip_threshold,
        switch_threshold=spec.switch_threshold,
        batch_size=spec.batch_size,
        frame=1,  # every raw step is a recurrent step, as in the thesis
        readout="last",  # the thesis' readout, which temporal gradients need
        conv_kernels=None,  # the raw inputs, as in the thesis (temporal gradients need it)
        random_state=spec.seed,
        **({"label_smoothing": 0.0} if classification else {}),  # the thesis' plain cross-entropy
    )


def _validation_error(model: Any, task: str, X: list, y: np.ndarray) -> float:
    """Task error of ``model`` on the validation set (class scores or values)."""
    _, classification = TASKS[task]
    prediction = model.predict_proba(X) if classification else model.predict(X)
    return task_error(task, y, prediction)


def recurrent_radius(model: Any) -> float | None:
    """Spectral radius of a fitted model's first recurrent matrix; None when it is not
    square (gated cells stack their gates)."""
    weight = model.module_.recurrent_weight.detach().cpu().numpy()
    if weight.shape[0] != weight.shape[1]:
        return None
    return float(np.abs(np.linalg.eigvals(weight)).max())


def branch_counts(model: Any) -> dict[str, int] | None:
    """How many updates of a ``'simplex'`` model took each branch of the thesis'
    algorithm 3.2 (simplex direction, descent fallback, switched to the anti-gradient,
    skipped); None for the other optimizers."""
    return model.branch_counts_


def _radius(model: Any) -> str:
    """`` rho <spectral radius>`` for a verbose line, or nothing for gated cells."""
    radius = recurrent_radius(model)
    return "" if radius is None else f" rho {radius:.2f}"


def train_on_stream(
    spec: RunSpec,
    *,
    verbose: bool = False,
    on_check: Callable[[int, float, Any], None] | None = None,
    print_fn: Callable[[str], None] = print,
    deadline: float | None = None,
) -> tuple[Any, dict[str, Any]]:
    """Train one estimator on fresh batches until success, the update cap or a deadline.

    Parameters
    ----------
    spec : RunSpec
        The run's settings.
    verbose : bool, default=False
        Print a line at every validation check.
    on_check : callable, optional
        Called as ``on_check(updates, error, model)`` after every validation check.
    print_fn : callable, default=print
        Where verbose lines go.
    deadline : float, optional
        A ``time.time()`` value: the first validation check after it ends the run. Such a
        run is recorded as what it is, a run with a smaller cap: its ``max_updates`` is
        the updates it did, and ``planned_max_updates`` keeps the cap it was started
        with (a later run of the same settings with the whole cap supersedes it in
        :func:`final_runs`).

    Returns
    -------
    model : RNNClassifier or RNNRegressor
        The trained estimator.
    record : dict
        The settings (every field of ``spec``) and ``updates`` (done), ``solved``,
        ``error`` (last validation error), ``best_error``, ``seconds`` (training and
        validation, wall clock), ``seconds_per_update``, ``branch_counts`` (see
        :func:`branch_counts`), ``curve``: one
        ``[updates, error, training loss, seconds, sequences scored]`` per check, and
        ``planned_max_updates`` when the deadline stopped it.
    """
    generator, classification = TASKS[spec.task]
    model = make_estimator(spec)
    X_valid, y_valid = generator(
        spec.n_validation, spec.length, random_state=VALIDATION_SEED_OFFSET + spec.seed
    )
    stream = np.random.default_rng(spec.seed)
    fit_kwargs = {"classes": np.arange(4)} if classification else {}
    curve: list[list[float]] = []
    start = time.perf_counter()
    error, updates, n_scored = float("nan"), 0, 0
    stopped_at: int | None = None  # updates done when the deadline ended the run
    while updates < spec.max_updates:
        X, y = generator(spec.batch_size, spec.length, random_state=stream)
        model.partial_fit(X, y, **fit_kwargs)
        updates += 1
        if updates % spec.check_every == 0 or updates == spec.max_updates:
            n_scored = spec.n_validation
            if spec.n_screen is not None and spec.n_screen < spec.n_validation:
                n_scored = spec.n_screen
                error = _validation_error(
                    model, spec.task, X_valid[:n_scored], y_valid[:n_scored]
                )
                if error < 3 * spec.target_error:
                    n_scored = spec.n_validation
            if n_scored == spec.n_validation:
                error = _validation_error(model, spec.task, X_valid, y_valid)
            elapsed = time.perf_counter() - start
            loss = float(model.loss_curve_[-1])
            curve.append([updates, error, loss, round(elapsed, 3), n_scored])
            if verbose:
                counts = branch_counts(model) or ""
                print_fn(
                    f"  {spec.task} T={spec.length} {spec.cell} {spec.optimizer} seed {spec.seed} "
                    f"update {updates}: error {error:.4f} (on {n_scored}) loss {loss:.4g} "
                    f"{elapsed:.0f} s{_radius(model)} {counts}"
                )
            if on_check is not None:
                on_check(updates, error, model)
            if n_scored == spec.n_validation and error < spec.target_error:
                break
            if deadline is not None and time.time() >= deadline and updates < spec.max_updates:
                stopped_at = updates
                break
    seconds = time.perf_counter() - start
    record = asdict(spec)
    if stopped_at is not None:
        record.update(max_updates=stopped_at, planned_max_updates=spec.max_updates)
    record.update(
        updates=updates,
        solved=bool(n_scored == spec.n_validation and error < spec.target_error),
        error=error,
        best_error=min((c[1] for c in curve), default=float("nan")),
        seconds=round(seconds, 3),
        seconds_per_update=round(seconds / max(updates, 1), 5),
        branch_counts=branch_counts(model),
        curve=curve,
    )
    return model, record


def load_records(path: str | Path) -> list[dict[str, Any]]:
    """Records saved by :func:`run_all` (an empty list when the file does not exist).

    A setting that a record predates (a field added to :class:`RunSpec` later, such as
    ``cell``) gets its default, the value every such run used; a record without its own
    ``machine`` (written before records kept one) gets the file's."""
    path = Path(path)
    if not path.exists():
        return []
    try:
        with open(path) as handle:
            data = json.load(handle)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ValueError(
            f"{path} is not a results file of run_all: it is not JSON ({error}). Pass the "
            "output folder of a run (or the .json file in it) instead."
        ) from None
    if not isinstance(data, dict) or "runs" not in data:
        raise ValueError(f"{path} is not a results file of run_all (no 'runs' list).")
    defaults = {f.name: f.default for f in fields(RunSpec) if f.default is not MISSING}
    if "machine" in data:  # a record written before records kept their own: the file's
        defaults["machine"] = data["machine"]
    return [{**defaults, **record} for record in data["runs"]]


def _spec_of(record: dict[str, Any]) -> RunSpec:
    return RunSpec(**{f.name: record[f.name] for f in fields(RunSpec)})


def _write(path: Path, meta: dict[str, Any], records: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    with open(tmp, "w") as handle:
        json.dump({**meta, "runs": records}, handle, indent=1)
    tmp.replace(path)
    columns = [f.name for f in fields(RunSpec)] + [
        "updates", "solved", "error", "best_error", "seconds", "seconds_per_update",
    ]
    with open(path.with_suffix(".csv"), "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(columns)
        for record in records:
            writer.writerow([record[c] for c in columns])


def run_all(
    specs: Iterable[RunSpec],
    path: str | Path,
    *,
    meta: dict[str, Any] | None = None,
    resume: bool = True,
    verbose: bool = False,
    print_fn: Callable[[str], None] = print,
    deadline: float | None = None,
) -> list[dict[str, Any]]:
    """Run every spec one after the other, saving the records after each run.

    Parameters
    ----------
    specs : iterable of RunSpec
        The runs.
    path : str or Path
        JSON file of the results (a CSV table without the curves is written beside it).
    meta : dict, optional
        Stored at the top level of the JSON file (command, mode, ...), with
        :func:`machine_info` of this call; each new record keeps its own too, so that
        runs added to a file later do not rename the machine and commit of earlier ones.
    resume : bool, default=True
        Keep the records already in ``path`` and skip the specs they hold.
    verbose : bool, default=False
        Print every validation check.
    print_fn : callable, default=print
        Where progress lines go.
    deadline : float, optional
        A ``time.time()`` value: the run going on when it passes stops at its next
        validation check and is recorded with the updates it did as its cap (see
        :func:`train_on_stream`); the specs not started by then are not run, and not
        recorded.

    Returns
    -------
    list of dict
        The records of ``specs`` that are in ``path`` (the resumed ones and the new ones),
        in their order.
    """
    path = Path(path)
    records = load_records(path) if resume else []
    done = {_spec_of(r).key(): r for r in records}
    meta = {**(meta or {}), "machine": machine_info()}
    wanted = []
    for spec in specs:
        if spec.key() in done:
            print_fn(f"{_describe(spec)}: already in {path}, skipped")
            wanted.append(done[spec.key()])
        elif deadline is not None and time.time() >= deadline:
            print_fn(f"{_describe(spec)}: not started, the time budget is spent")
        else:
            _, record = train_on_stream(
                spec, verbose=verbose, print_fn=print_fn, deadline=deadline
            )
            record["machine"] = meta["machine"]  # each run keeps where it was measured
            records.append(record)
            done[spec.key()] = record
            _write(path, meta, records)
            cut = (f" (time budget: stopped before the cap of {record['planned_max_updates']:,})"
                   if "planned_max_updates" in record else "")
            print_fn(
                f"{_describe(spec)}: {'solved' if record['solved'] else 'NOT solved'} after "
                f"{record['updates']} updates{cut}, error {record['error']:.4f}, "
                f"{record['seconds']:.0f} s"
            )
            wanted.append(record)
    if not path.exists():  # every spec was resumed from nothing: still write the file
        _write(path, meta, records)
    return wanted


def _merge_source(source: str | Path, name: str) -> Path:
    """The results file that ``--merge source`` names: ``source`` itself, or the file
    ``name`` in it when it is a folder."""
    source = Path(source)
    return source / name if source.is_dir() else source


def merge_results(sources: Iterable[str | Path], path: str | Path) -> list[dict[str, Any]]:
    """Add the runs of other results files (e.g. one per seed, run in parallel processes
    with their own ``--out``) to ``path``; runs already there are kept, not duplicated.

    Returns
    -------
    list of dict
        The records now in ``path``.
    """
    path = Path(path)
    records = load_records(path)
    meta: dict[str, Any] = {}
    if path.exists():
        meta = {k: v for k, v in json.loads(path.read_text()).items() if k != "runs"}
    seen = {_spec_of(r).key() for r in records}
    for source in sources:
        source = _merge_source(source, path.name)
        if not source.exists():
            raise FileNotFoundError(f"no results file to merge at {source}.")
        if not meta:
            meta = {k: v for k, v in json.loads(source.read_text()).items() if k != "runs"}
        for record in load_records(source):
            if _spec_of(record).key() not in seen:
                records.append(record)
                seen.add(_spec_of(record).key())
    _write(path, meta, records)
    return records


def check_merge_sources(parser: Any, sources: Iterable[str | Path] | None, name: str) -> None:
    """Refuse through ``parser``, before anything runs, a ``--merge`` folder that holds no
    results file ``name`` (a mistyped folder, or the output folder of another script),
    or a file that does not exist."""
    for source in sources or ():
        if not _merge_source(source, name).exists():
            parser.error(f"--merge {source}: no {name} there (expected the output folder of "
                         f"an earlier run, or the {name} in it).")


def add_common_arguments(parser: Any, default_out: str) -> None:
    """The command-line flags every experiment script shares."""
    parser.add_argument("--quick", action="store_true",
                        help="a few seconds: tiny sizes, to check that the script works")
    parser.add_argument("--out", default=None,
                        help=f"output folder (default {default_out}, or its 'quick' "
                        "subfolder with --quick)")
    parser.add_argument("--threads", type=positive_int, default=1, help="PyTorch CPU threads")
    parser.add_argument("--plot-only", action="store_true",
                        help="only draw the figure from the results saved in --out")
    parser.add_argument("--verbose", action="store_true", help="print every validation check")
    parser.add_argument("--time-budget", type=float, default=None, metavar="MINUTES",
                        help="wall-clock minutes for the whole command: the run going on "
                        "then stops at its next check and is recorded with the updates it "
                        "did as its cap; runs not started are left for a later command")
    parser.add_argument("--merge", nargs="+", default=None, metavar="FOLDER",
                        help="first add the runs saved in these output folders (e.g. one per "
                        "parallel process) to the results in --out, then go on")


def deadline_of(args: Any) -> float | None:
    """The ``time.time()`` at which ``--time-budget`` minutes from now run out (None
    without the flag)."""
    if args.time_budget is None:
        return None
    if not args.time_budget > 0:  # NaN too: a deadline never reached
        raise SystemExit(f"--time-budget must be a positive number of minutes; got {args.time_budget}.")
    return time.time() + 60 * args.time_budget


def output_folder(args: Any, default_out: str) -> Path:
    """``--out``, or the default folder (its ``quick`` subfolder with ``--quick``),
    refused before any run where it cannot take the results: a file there, or in the
    path, was met by the first write, after the first run trained (and ``figures_3``'s
    whole measurement), and an empty name wrote into the current folder."""
    if args.out is None:
        return Path(default_out) / "quick" if args.quick else Path(default_out)
    check_output_path(args.out, folder=True)
    return Path(args.out)


def check_output_path(text: str, *, folder: bool) -> None:
    """Refuse ``--out`` (a folder, or with ``folder=False`` a file) before any run, where
    the results could not be written to it.

    Raises
    ------
    SystemExit
        Saying what ``--out`` takes and what is in its way.
    """
    kind = "a folder (the results are written as files in it)" if folder else "a file name (a JSON file)"
    if not text.strip():
        raise SystemExit(f"--out was given an empty name: it takes {kind}. Pass one, or leave --out out.")
    path = Path(text)
    if path.exists() and path.is_dir() != folder:
        found = "a file" if folder else "a folder"
        raise SystemExit(f"--out {text} is {found}: --out takes {kind}. Pass another name.")
    parent = path if folder else path.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise SystemExit(f"--out {text}: {parent} in its path is a file, not a folder. Pass another name.")
    if not os.access(parent, os.W_OK):
        raise SystemExit(f"--out {text}: the folder {parent} is not writable. Pass a folder you can write to.")


def rst_table(rows: Sequence[Sequence[Any]], header: Sequence[str], caption: str = "") -> str:
    """A reStructuredText ``list-table`` of ``rows`` (the docs include the written files)."""
    lines = [f".. list-table:: {caption}".rstrip(), "   :header-rows: 1", ""]
    for row in [header, *rows]:
        cells = [str(cell) for cell in row]
        lines.append(f"   * - {cells[0]}")
        lines.extend(f"     - {cell}" for cell in cells[1:])
    return "\n".join(lines) + "\n"


def runs_table(records: Sequence[dict[str, Any]], caption: str = "") -> str:
    """Every run of ``records`` as a reStructuredText table: settings, outcome, time."""
    header = ["task", "T", "cell", "optimizer", "psi", "lr", "rho", "seed", "cap", "updates",
              "solved", "last error", "best error", "seconds", "simplex steps"]
    rows = [
        [
            r["task"].replace("_", " "), r["length"], r["cell"], r["optimizer"],
            "" if r["optimizer"] != "simplex" else r["switch_threshold"],
            r["learning_rate"], r["spectral_radius"], r["seed"], _cap(r),
            f"{r['updates']:,}", "**yes**" if r["solved"] else "no",
            f"{r['error']:.4f}" + ("" if r["curve"][-1][4] == r["n_validation"]
                                   else f" (on {r['curve'][-1][4]:,})"),
            f"{r['best_error']:.4f}", f"{r['seconds']:.0f}", _simplex_share(r),
        ]
        for r in records
    ]
    return rst_table(rows, header, caption)


def _cap(record: dict[str, Any]) -> str:
    """A run's cap, and the cap it was started with when a time budget cut it short."""
    planned = record.get("planned_max_updates")
    return f"{record['max_updates']:,}" + ("" if planned is None else f" (time; {planned:,} planned)")


def _simplex_share(record: dict[str, Any]) -> str:
    """The share of a simplex run's updates that took the simplex direction (the rest
    switched to the anti-gradient or fell back to it); blank for other optimizers and for
    runs recorded before the counts were kept."""
    counts = record.get("branch_counts")
    if not counts:
        return ""
    return f"{counts['simplex'] / max(sum(counts.values()), 1):.0%}"


def _describe(spec: RunSpec) -> str:
    psi = "" if spec.optimizer != "simplex" else f" psi {spec.switch_threshold}"
    return (
        f"{spec.task} T={spec.length} {spec.cell} {spec.optimizer}{psi} lr {spec.learning_rate} "
        f"rho {spec.spectral_radius} seed {spec.seed}"
    )


def final_runs(records: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each run's longest attempt: among records that differ only in ``max_updates``, the
    one with the largest cap (a rerun with a larger cap supersedes a capped run in
    summaries and figures; tables of every run still list both)."""
    best: dict[tuple, dict[str, Any]] = {}
    for record in records:
        key = tuple(record[f.name] for f in fields(RunSpec) if f.name != "max_updates")
        if key not in best or record["max_updates"] > best[key]["max_updates"]:
            best[key] = record
    return [r for r in records if any(r is b for b in best.values())]


def summarize(
    records: Sequence[dict[str, Any]], by: Sequence[str]
) -> list[dict[str, Any]]:
    """Group records by the fields ``by``: runs, successes, updates of the solved runs.

    Returns
    -------
    list of dict
        One row per group (in order of first appearance) with the ``by`` fields and
        ``runs``, ``solved``, ``success_rate``, ``mean_updates_solved`` (None when no
        run succeeded), ``max_updates`` (the largest cap) and ``seconds`` (total).
    """
    groups: dict[tuple, list[dict[str, Any]]] = {}
    for record in records:
        groups.setdefault(tuple(record[b] for b in by), []).append(record)
    rows = []
    for values, group in groups.items():
        solved = [r for r in group if r["solved"]]
        rows.append(
            {
                **dict(zip(by, values)),
                "runs": len(group),
                "solved": len(solved),
                "success_rate": len(solved) / len(group),
                "mean_updates_solved": (
                    float(np.mean([r["updates"] for r in solved])) if solved else None
                ),
                "max_updates": max(r["max_updates"] for r in group),
                "seconds": float(sum(r["seconds"] for r in group)),
            }
        )
    return rows

