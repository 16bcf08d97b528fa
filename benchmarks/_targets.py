"""The defaults' targets, read from the rows of the defaults benchmark over several seeds,
and the table of those rows for the docs.

``bench_defaults.py --seed 0 1 2 ...`` records one row per data set, model and seed
(``dataset``, ``model``, ``seed``, ``score``, ``seconds``); :func:`summarize` averages
them, :func:`rst_table` writes them as the docs' table, and :func:`check_targets` says,
set by set, whether the defaults (the model ``RNN``) hold each target over those seeds:

- at least the plain skorch GRU and the summary-statistics regression (mean score);
- within 0.03 of the best peer (the best mean of the other models), on at least half
  of the sets;
- fit + predict no slower than the skorch GRU (mean seconds; the seeds on which it
  was slower are counted);
- JapaneseVowels >= 0.985.

Only seeds on which both models of a comparison ran are compared, so that runs merged
from several processes (``--merge``) with different models stay paired. A model that
ran on none of the defaults' seeds of a set is not a peer there. The variants (``RNN <name>``) are neither
the defaults nor peers.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

DEFAULTS = "RNN"
SKORCH = "skorch GRU"
SUMMARY = "summary LR"
#: The margin to the best peer, and the bar for JapaneseVowels.
PEER_MARGIN, JAPANESE_VOWELS_BAR = 0.03, 0.985


def _by_seed(rows: Iterable[dict[str, Any]]) -> dict[tuple[str, str], dict[int, dict[str, Any]]]:
    table: dict[tuple[str, str], dict[int, dict[str, Any]]] = {}
    for row in rows:
        seeds = table.setdefault((row["dataset"], row["model"]), {})
        seed = int(row.get("seed") or 0)
        if seed in seeds:
            raise ValueError(f"two rows for {row['model']!r} on {row['dataset']!r} with seed "
                             f"{seed}: merge runs of different seeds, or of different models")
        seeds[seed] = row
    return table


def summarize(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per data set and model: the seeds, the mean and standard deviation of the
    score, and the mean seconds, in the order the rows came.

    Examples
    --------
    >>> rows = [{"dataset": "d", "model": "RNN", "seed": s, "score": v, "seconds": 1.0}
    ...         for s, v in [(0, 0.9), (1, 0.8)]]
    >>> [(r["model"], r["seeds"], round(r["score"], 3)) for r in summarize(rows)]
    [('RNN', 2, 0.85)]
    """
    summary = []
    for (dataset, model), seeds in _by_seed(rows).items():
        scores = np.array([float(row["score"]) for row in seeds.values()])
        summary.append({
            "dataset": dataset, "model": model, "seeds": len(seeds),
            "score": float(scores.mean()), "sd": float(scores.std(ddof=1)) if len(scores) > 1 else 0.0,
            "seconds": float(np.mean([float(row["seconds"]) for row in seeds.values()])),
        })
    return summary


def _paired(table: dict, dataset: str, a: str, b: str, key: str) -> tuple[float, float, int, int]:
    """Means of ``key`` of models ``a`` and ``b`` over their common seeds, the number of
    those seeds, and on how many of them ``a`` was below ``b``."""
    first, second = table[dataset, a], table[dataset, b]
    common = sorted(set(first) & set(second))
    x = np.array([float(first[s][key]) for s in common])
    y = np.array([float(second[s][key]) for s in common])
    return float(x.mean()), float(y.mean()), len(common), int((x < y).sum())


def check_targets(rows: Iterable[dict[str, Any]]) -> list[tuple[str, str, bool, str]]:
    """``(data set, target, held, detail)`` for every target that the rows can decide.

    The last entry, on the data set ``'all'``, is the count of sets within 0.03 of their
    best peer, held when it is at least half of the sets that have peers.

    Examples
    --------
    >>> rows = [{"dataset": "d", "model": m, "seed": s, "score": v, "seconds": t}
    ...         for s in (0, 1) for m, v, t in [("RNN", 0.90, 1.0), ("skorch GRU", 0.80, 2.0),
    ...                                           ("summary LR", 0.95, 0.1)]]
    >>> for dataset, target, held, detail in check_targets(rows):
    ...     print(dataset, target, held)
    d >= skorch GRU True
    d >= summary LR False
    d within 0.03 of the best peer False
    d time <= skorch GRU True
    all within 0.03 of the best peer on half of the sets False
    """
    table = _by_seed(rows)
    results: list[tuple[str, str, bool, str]] = []
    close, with_peers = 0, 0
    for dataset in dict.fromkeys(d for d, m in table if m == DEFAULTS):
        ours_seeds = set(table[dataset, DEFAULTS])
        # A peer is a model that ran on at least one of the defaults' seeds.
        peers = [m for d, m in table if d == dataset and m != DEFAULTS and not m.startswith("RNN ")
                 and ours_seeds & set(table[d, m])]
        for peer in (SKORCH, SUMMARY):
            if peer in peers:
                ours, theirs, n, below = _paired(table, dataset, DEFAULTS, peer, "score")
                results.append((dataset, f">= {peer}", ours >= theirs,
                                f"{ours:.4f} against {theirs:.4f} over {n} seeds; below on {below}"))
        if peers:
            means = {peer: _paired(table, dataset, DEFAULTS, peer, "score")[:2] for peer in peers}
            best = max(peers, key=lambda peer: means[peer][1])
            ours, theirs = means[best]
            held = ours >= theirs - PEER_MARGIN
            with_peers += 1
            close += held
            results.append((dataset, f"within {PEER_MARGIN} of the best peer", held,
                            f"{ours:.4f} against {best} {theirs:.4f}"))
        if SKORCH in peers:
            ours, theirs, n, faster = _paired(table, dataset, DEFAULTS, SKORCH, "seconds")
            results.append((dataset, f"time <= {SKORCH}", ours <= theirs,
                            f"{ours:.2f} s against {theirs:.2f} s; slower on {n - faster} of {n} seeds"))
        if dataset == "JapaneseVowels":
            seeds = table[dataset, DEFAULTS]
            mean = float(np.mean([float(row["score"]) for row in seeds.values()]))
            results.append((dataset, f">= {JAPANESE_VOWELS_BAR}", mean >= JAPANESE_VOWELS_BAR,
                            f"{mean:.4f} over {len(seeds)} seeds"))
    if with_peers:
        results.append(("all", f"within {PEER_MARGIN} of the best peer on half of the sets",
                        2 * close >= with_peers, f"{close} of {with_peers} sets"))
    return results


def report(rows: list[dict[str, Any]]) -> str:
    """The summary and the targets as text, for the end of a run."""
    lines = ["mean over seeds:"]
    for row in summarize(rows):
        lines.append(f"  {row['dataset']:24s} {row['model']:24s} {row['score']:.4f} "
                     f"(sd {row['sd']:.4f}, {row['seeds']} seeds)  {row['seconds']:7.2f} s")
    lines.append("the defaults' targets:")
    for dataset, target, held, detail in check_targets(rows):
        lines.append(f"  {'held' if held else 'NOT held':8s} {dataset:24s} {target}: {detail}")
    return "\n".join(lines)


def rst_table(rows: list[dict[str, Any]]) -> str:
    """A list-table: one row per dataset, one column per model ("score (seconds)").

    A note that every cell shares (the timing, the number of seeds) is said once, in a
    line under the table; a cell's own note stays in the cell, in brackets.
    """
    models = list(dict.fromkeys(row["model"] for row in rows
                                if row["dataset"] not in ("PBC cohort", "NAFLD cohort")))
    models += [m for m in dict.fromkeys(row["model"] for row in rows) if m not in models]
    datasets = list(dict.fromkeys(row["dataset"] for row in rows))
    cell = {(row["dataset"], row["model"]): row for row in summarize(rows)}
    notes = {(row["dataset"], row["model"]): row["note"] for row in rows}
    parts: dict[tuple[str, str], list[str]] = {}
    for key, row in cell.items():
        seeds = [f"mean of {row['seeds']} seeds"] if row["seeds"] > 1 else []
        parts[key] = [part for part in notes.get(key, "").split("; ") if part] + seeds
    shared = [part for part in next(iter(parts.values()), [])
              if all(part in other for other in parts.values())]
    lines = [".. list-table::", "   :header-rows: 1", "", "   * - data"]
    lines += [f"     - {model}" for model in models]
    for dataset in datasets:
        lines.append(f"   * - {dataset}")
        for model in models:
            row = cell.get((dataset, model))
            text = "" if row is None else f"{row['score']:.3f} ({row['seconds']:.1f} s)"
            own = [part for part in parts.get((dataset, model), []) if part not in shared]
            if own:
                text += f" [{'; '.join(own)}]"
            lines.append(f"     - {text}".rstrip())
    if shared:
        lines += ["", f"Every cell: {'; '.join(shared)}."]
    return "\n".join(lines) + "\n"
