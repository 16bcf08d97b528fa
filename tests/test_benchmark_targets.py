"""The defaults benchmark's reading of its targets over several seeds, and its docs table."""

import doctest

import pytest

from benchmarks import _targets
from benchmarks._targets import check_targets, report, rst_table, summarize


def rows_of(table):
    """``{(dataset, model): [(score, seconds) per seed]}`` as benchmark rows."""
    return [{"dataset": dataset, "model": model, "seed": seed, "score": score, "seconds": seconds}
            for (dataset, model), runs in table.items() for seed, (score, seconds) in enumerate(runs)]


def held(results):
    return {(dataset, target): ok for dataset, target, ok, _ in results}


def test_module_examples_run():
    result = doctest.testmod(_targets)
    assert result.attempted > 0 and result.failed == 0


def test_means_over_seeds_decide_and_the_losing_seeds_are_counted():
    rows = rows_of({
        ("JapaneseVowels", "RNN"): [(0.99, 1.0), (0.98, 1.0), (0.982, 3.0)],
        ("JapaneseVowels", "skorch GRU"): [(0.95, 2.0), (0.99, 2.0), (0.95, 2.0)],
        ("JapaneseVowels", "summary LR"): [(0.986, 0.0)] * 3,
    })
    results = check_targets(rows)
    verdict = held(results)
    assert verdict["JapaneseVowels", ">= skorch GRU"]  # 0.984 against 0.963, below on one seed
    assert not verdict["JapaneseVowels", ">= summary LR"]  # 0.984 against 0.986
    assert verdict["JapaneseVowels", "within 0.03 of the best peer"]
    assert verdict["JapaneseVowels", "time <= skorch GRU"]  # 1.67 s against 2 s
    assert not verdict["JapaneseVowels", ">= 0.985"]
    details = {(d, t): detail for d, t, _, detail in results}
    assert "below on 1" in details["JapaneseVowels", ">= skorch GRU"]
    assert "slower on 1 of 3 seeds" in details["JapaneseVowels", "time <= skorch GRU"]
    assert "NOT held" in report(rows) and "held" in report(rows)


def test_only_common_seeds_are_compared():
    # The peer ran on seed 0 only: the defaults' poor seed 1 is not held against it.
    rows = rows_of({("set", "RNN"): [(0.9, 1.0), (0.1, 1.0)], ("set", "skorch GRU"): [(0.8, 1.0)]})
    assert held(check_targets(rows))["set", ">= skorch GRU"]
    assert summarize(rows)[0]["score"] == pytest.approx(0.5)


def test_a_model_of_other_seeds_only_is_no_peer():
    rows = rows_of({("set", "RNN"): [(0.9, 1.0)]}) + [
        {"dataset": "set", "model": "skorch GRU", "seed": 1, "score": 0.99, "seconds": 0.1}]
    assert check_targets(rows) == []


def test_variants_and_the_untimed_model_are_not_peers():
    rows = rows_of({
        ("PBC cohort", "RNN"): [(0.89, 1.0)],
        ("PBC cohort", "RNN (no time)"): [(0.99, 1.0)],
        ("PBC cohort", "RNN ls0"): [(0.99, 1.0)],
        ("PBC cohort", "summary LR"): [(0.87, 0.1)],
    })
    results = [(target, ok, detail) for dataset, target, ok, detail in check_targets(rows)
               if dataset == "PBC cohort"]
    assert [target for target, _, _ in results] == [">= summary LR", "within 0.03 of the best peer"]
    assert results[1][2] == "0.8900 against summary LR 0.8700"


def test_half_of_the_sets_within_the_margin():
    close = {("a", "RNN"): [(0.9, 1.0)], ("a", "MiniRocket"): [(0.92, 1.0)]}
    far = {("b", "RNN"): [(0.5, 1.0)], ("b", "MiniRocket"): [(0.9, 1.0)],
           ("c", "RNN"): [(0.5, 1.0)], ("c", "MiniRocket"): [(0.9, 1.0)]}
    assert held(check_targets(rows_of({**close, **dict(list(far.items())[:2])})))[
        "all", "within 0.03 of the best peer on half of the sets"]
    assert not held(check_targets(rows_of({**close, **far})))[
        "all", "within 0.03 of the best peer on half of the sets"]


def test_two_rows_of_one_seed_are_refused():
    row = {"dataset": "set", "model": "RNN", "seed": 0, "score": 0.9, "seconds": 1.0}
    with pytest.raises(ValueError, match="two rows for 'RNN' on 'set' with seed 0"):
        summarize([row, dict(row)])


def test_the_docs_table_says_a_shared_note_once_and_keeps_a_cells_own():
    rows = [
        {"dataset": "GunPoint", "model": model, "seed": seed, "score": 0.9, "seconds": 1.0,
         "note": "window 10%; median of 3" if model == "DTW 1-NN" else "median of 3"}
        for model in ("RNN", "DTW 1-NN") for seed in (0, 1)
    ]
    table = rst_table(rows)
    assert table.count("median of 3") == 1
    assert table.rstrip().endswith("Every cell: median of 3; mean of 2 seeds.")
    assert "0.900 (1.0 s) [window 10%]" in table
