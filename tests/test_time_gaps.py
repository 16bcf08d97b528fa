"""Time stamps as gaps (issue 4): unit-free encoding, checks, the time-aware 'decay' cell."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning

from sklearn_rnn import RNNClassifier, RNNRegressor
from sklearn_rnn.nn import DecayRecurrence, RecurrentNetwork
from sklearn_rnn.sequences import InputEncoder

DAYS_PER_YEAR = 365.25
SMALL = dict(hidden_size=6, max_iter=8, random_state=0)


def visits(n=40, seed=0):
    """Sequences of 2-7 visits at irregular days (column 0), two features; the label
    says whether the last gap was longer than a year."""
    rng = np.random.default_rng(seed)
    X, y = [], []
    for _ in range(n):
        steps = rng.integers(2, 8)
        days = np.cumsum(rng.uniform(30, 800, size=steps)) + rng.uniform(0, 5000)
        X.append(np.column_stack([days, rng.normal(size=(steps, 2))]))
        y.append(int(days[-1] - days[-2] > DAYS_PER_YEAR))
    return X, np.array(y)


def fit(estimator, X, y):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return estimator.fit(X, y)


def in_years(X):
    return [np.column_stack([x[:, 0] / DAYS_PER_YEAR, x[:, 1:]]) for x in X]


# ------------------------------------------------------------------ encoding
def test_encoder_replaces_the_time_column_by_gap_and_elapsed_channels():
    X = [np.array([[10.0, 1.0], [40.0, 2.0], [100.0, np.nan]]), np.array([[5.0, 3.0], [25.0, 4.0]])]
    encoder = InputEncoder.fit(X, time_feature=0)
    assert encoder.time_scale == 30.0  # median of the gaps 30, 60, 20
    assert encoder.n_values == 1 and encoder.n_masked == 1 and encoder.gap_channel == 2
    first, second = encoder.encode_arrays(X)
    # value (carried forward), mask, gap / 30, elapsed / 30
    np.testing.assert_allclose(first, [[1, 1, 0, 0], [2, 1, 1, 1], [2, 0, 2, 3]])
    np.testing.assert_allclose(second, [[3, 1, 0, 0], [4, 1, 2 / 3, 2 / 3]])


def test_encoding_is_unit_free_and_ignores_the_time_origin():
    X, _ = visits()
    channels = InputEncoder.fit(X, time_feature=0).encode_arrays(X)
    years = in_years(X)
    shifted = [np.column_stack([x[:, 0] - x[0, 0] + 1e4 * i, x[:, 1:]]) for i, x in enumerate(X)]
    for other in (years, shifted):
        again = InputEncoder.fit(other, time_feature=0).encode_arrays(other)
        for a, b in zip(channels, again, strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("cell", ["auto", "tanh"])
def test_days_and_years_give_the_same_predictions(cell):
    X, y = visits()
    in_days = fit(RNNClassifier(time_feature=0, cell=cell, **SMALL), X, y)
    in_yrs = fit(RNNClassifier(time_feature=0, cell=cell, **SMALL), in_years(X), y)
    np.testing.assert_allclose(in_days.predict_proba(X), in_yrs.predict_proba(in_years(X)), atol=1e-6)


def test_time_column_is_not_an_ordinary_feature():
    """Moving each sequence in time (same gaps) changes nothing; the network has no
    input for the raw time."""
    X, y = visits()
    model = fit(RNNClassifier(time_feature=0, **SMALL), X, y)
    moved = [np.column_stack([x[:, 0] + 1e5 * (i % 3), x[:, 1:]]) for i, x in enumerate(X)]
    np.testing.assert_allclose(model.predict_proba(X), model.predict_proba(moved), atol=1e-9)
    assert model.module_.input_projection.in_features == 2 + 2  # 2 values, gap, elapsed
    assert model.n_features_in_ == 3


def test_negative_time_feature_counts_from_the_end():
    X, y = visits()
    last = [np.roll(x, -1, axis=1) for x in X]  # time column moved to the end
    a = fit(RNNClassifier(time_feature=0, **SMALL), X, y)
    b = fit(RNNClassifier(time_feature=-1, **SMALL), last, y)
    np.testing.assert_allclose(a.predict_proba(X), b.predict_proba(last), atol=1e-6)


def test_the_network_uses_the_gaps():
    X, y = visits(160)
    X_test, y_test = visits(200, seed=1)
    params = dict(hidden_size=12, learning_rate=0.03, max_iter=60, random_state=0)
    timed = fit(RNNClassifier(time_feature=0, **params), X, y)
    untimed = fit(RNNClassifier(**params), [x[:, 1:] for x in X], y)
    assert timed.score(X_test, y_test) > 0.9
    assert untimed.score([x[:, 1:] for x in X_test], y_test) < 0.75


# -------------------------------------------------------------------- errors
@pytest.mark.parametrize("Estimator", [RNNClassifier, RNNRegressor])
def test_decreasing_times_raise_naming_the_sample(Estimator):
    X, y = visits(6)
    X[4] = X[4][::-1].copy()
    with pytest.raises(ValueError, match=r"sequence 4 of X has times that decrease at step 1 .*Sort"):
        Estimator(time_feature=0, **SMALL).fit(X, y)
    X, y = visits(6)
    model = fit(Estimator(time_feature=0, **SMALL), X, y)
    X[2] = X[2][::-1].copy()
    with pytest.raises(ValueError, match="sequence 2 of X has times that decrease"):
        model.predict(X)


def test_missing_time_raises_and_equal_times_are_accepted():
    X, y = visits(6)
    X[3][1, 0] = np.nan
    with pytest.raises(ValueError, match=r"sequence 3 of X has no time at step 1 \(NaN"):
        RNNClassifier(time_feature=0, **SMALL).fit(X, y)
    X, y = visits(6)
    X[3][1, 0] = X[3][0, 0]  # two steps at the same time: non-decreasing is enough
    # ... but the 'decay' cell does not move its state at a gap of 0: the step's values
    # would be lost without a word.
    with pytest.warns(UserWarning, match=r"1 of the \d+ training steps share the time of the "
                                         r"step before.*'decay' cell.*cell='gru'"):
        fit(RNNClassifier(time_feature=0, **SMALL), X, y)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # a cell that reads the gap as an input
        fit(RNNClassifier(time_feature=0, cell="gru", **SMALL), X, y)
    # Every training call's data is checked, not only the first call's.
    untied, _ = visits(6)
    stream = RNNClassifier(time_feature=0, **SMALL).partial_fit(untied, y, classes=np.unique(y))
    warm = fit(RNNClassifier(time_feature=0, warm_start=True, **SMALL), untied, y)
    for call in (lambda: stream.partial_fit(X, y), lambda: fit(warm, X, y)):
        with pytest.warns(UserWarning, match=r"1 of the \d+ training steps share the time") as caught:
            call()
        assert caught[0].filename == __file__  # pointed at the caller's line


def test_unsigned_times_that_decrease_are_refused_and_encoded_as_floats():
    # np.diff of unsigned times wrapped around: 5 then 3 passed, with a gap of 4e9.
    from sklearn_rnn.sequences._encoding import check_times

    times = np.array([5, 3, 10], dtype=np.uint32)
    with pytest.raises(ValueError, match=r"times that decrease at step 1 \(3 after 5\)"):
        check_times([times[:, None].astype(np.float64)], 0)
    with pytest.raises(ValueError, match="decrease at step 1"):
        InputEncoder.fit([np.c_[times, np.ones(3)].astype(np.uint32)], time_feature=0)
    rising = np.array([[1, 7], [4, 8], [9, 9]], dtype=np.uint32)
    floats = rising.astype(np.float64)
    np.testing.assert_array_equal(InputEncoder.fit([rising], time_feature=0).encode_arrays([rising])[0],
                                  InputEncoder.fit([floats], time_feature=0).encode_arrays([floats])[0])


def test_time_feature_out_of_range_and_decay_without_time():
    X, y = visits(6)
    with pytest.raises(ValueError, match=r"time_feature=3 is out of range: X has 3 features"):
        RNNClassifier(time_feature=3, **SMALL).fit(X, y)
    with pytest.raises(ValueError, match="cell='decay' reads the time between steps"):
        RNNClassifier(cell="decay", **SMALL).fit(X, y)
    with pytest.raises(ValueError, match="optimizer='simplex'"):
        RNNClassifier(cell="decay", time_feature=0, optimizer="simplex", **SMALL).fit(X, y)


def test_a_decreasing_time_at_prediction_names_its_sequence_in_x_not_in_a_chunk(monkeypatch):
    import sklearn_rnn._estimators as estimators

    X, y = visits(8)
    clf = fit(RNNClassifier(time_feature=0, hidden_size=3, max_iter=1, random_state=0), X, y)
    X[6] = X[6].copy()
    X[6][1, 0] = X[6][0, 0] - 1.0
    monkeypatch.setattr(estimators, "PREDICT_CHUNK_VALUES", 20)  # a few sequences per chunk
    with pytest.raises(ValueError, match="sequence 6 of X has times that decrease at step 1"):
        clf.predict(X)


# ------------------------------------------------------------ defaults: auto
def test_auto_cell_and_alpha_follow_the_time_feature():
    X, y = visits()
    timed = fit(RNNClassifier(time_feature=0, **SMALL), X, y)
    assert timed.module_.cell == "decay" and timed.net_.l2_penalty == pytest.approx(10 / len(X))
    plain = fit(RNNClassifier(**SMALL), X, y)
    assert plain.module_.cell == "gru" and plain.net_.l2_penalty == 0  # issue 17: no longer "tanh"
    simplex = fit(RNNClassifier(time_feature=0, optimizer="simplex", **SMALL), X, y)
    assert simplex.module_.cell == "tanh"


def test_alpha_shrinks_the_weight_matrices_only():
    X, y = visits()
    norms = {}
    for alpha in (0.0, 200.0):
        model = fit(RNNClassifier(time_feature=0, alpha=alpha, **SMALL), X, y)
        module = model.module_
        with torch.no_grad():
            norms[alpha] = float(module.input_projection.weight.norm() + module.recurrent_weight.norm())
        rates = module.recurrence.hidden_decay
    assert norms[200.0] < 0.8 * norms[0.0]
    assert rates.requires_grad  # decay rates are trained, never penalized


# ---------------------------------------------------------------- the cell
def test_decay_cell_by_hand():
    """One unit, W_rec = 0: h_1 = tanh(u_1), then h_t relaxes towards tanh(u_t) by the
    fraction 1 - exp(-rate * gap); a zero gap leaves the state unchanged."""
    cell = DecayRecurrence(1)
    with torch.no_grad():
        cell.weight_hh.zero_()
        cell.hidden_decay.fill_(float(np.log(np.expm1(0.5))))  # rate 0.5
    u = torch.tensor([[[0.3], [-0.8], [1.0], [0.2]]], dtype=torch.float32)
    gaps = torch.tensor([[0.0, 2.0, 0.0, 1.0]])
    h = cell(u, gaps)[0, :, 0].tolist()
    h1 = np.tanh(0.3)
    keep = np.exp(-1.0)
    h2 = keep * h1 + (1 - keep) * np.tanh(-0.8)
    h4 = np.exp(-0.5) * h2 + (1 - np.exp(-0.5)) * np.tanh(0.2)
    np.testing.assert_allclose(h, [h1, h2, h2, h4], rtol=1e-6)


def test_decay_cell_input_decay_by_hand():
    """A feature unobserved at a step fades from its last value towards the baseline
    with the time since it was last observed."""
    cell = DecayRecurrence(2, n_masked=1)
    with torch.no_grad():
        cell.input_decay.fill_(float(np.log(np.expm1(1.0))))  # rate 1
        cell.input_baseline.fill_(-1.0)
    #                value mask gap
    x = torch.tensor([[[2.0, 1.0, 0.0], [2.0, 0.0, 0.5], [2.0, 0.0, 1.0], [5.0, 1.0, 2.0]]])
    with torch.no_grad():
        decayed = cell.decay_inputs(x, x[..., 2])
    since = np.array([0.0, 0.5, 1.5])
    expected = np.exp(-since) * 2 + (1 - np.exp(-since)) * -1
    np.testing.assert_allclose(decayed[0, :3, 0], expected, rtol=1e-6)
    assert decayed[0, 3, 0] == 5.0  # observed again
    torch.testing.assert_close(decayed[..., 1:], x[..., 1:])  # masks and gap untouched


def test_decay_network_is_deterministic_and_its_states_match_forward():
    def build():
        return RecurrentNetwork(4, 5, 2, cell="decay", gap_channel=2, n_masked=1,
                                generator=torch.Generator().manual_seed(3))

    x = torch.rand(3, 6, 4)
    x[:, 0, 2] = 0
    lengths = torch.tensor([6, 4, 1])
    a, b = build(), build()
    torch.testing.assert_close(a(x, lengths), b(x, lengths), rtol=0, atol=0)
    states = a.forward_states(x, lengths)
    torch.testing.assert_close(states.outputs, a(x, lengths))
    assert states.hidden.shape == (3, 6, 5) and states.projected.shape == (3, 6, 5)
    loss = states.outputs.square().sum()
    loss.backward()
    assert a.recurrence.hidden_decay.grad.abs().sum() > 0


def test_decay_estimator_is_seeded_and_pickles():
    import pickle

    X, y = visits()
    model = fit(RNNClassifier(time_feature=0, **SMALL), X, y)
    again = fit(clone(model), X, y)
    np.testing.assert_array_equal(model.predict_proba(X), again.predict_proba(X))
    restored = pickle.loads(pickle.dumps(model))
    np.testing.assert_array_equal(restored.predict_proba(X), model.predict_proba(X))


def test_standard_cells_keep_their_states():
    net = RecurrentNetwork(3, 4, 2, generator=torch.Generator().manual_seed(0))
    states = net.forward_states(torch.rand(2, 5, 3), torch.tensor([5, 2]))
    inputs, projected, hidden, outputs = states[:4]
    assert inputs.shape == (2, 5, 3) and projected.shape == hidden.shape == (2, 5, 4)
    assert outputs.shape == (2, 2)


def test_times_are_checked_within_sequences_only_and_the_first_bad_step_is_named():
    """The check runs over all steps at once: a drop from one sequence's last time to
    the next one's first is no error, single-step sequences pass, and the error names
    the first bad sequence and step as a check of each sequence in turn would."""
    from sklearn_rnn.sequences._encoding import InputEncoder, check_times

    rng = np.random.default_rng(0)
    sequences = [np.column_stack([np.cumsum(rng.uniform(0, 2, n)) + 100 * (5 - i), rng.normal(size=n)])
                 for i, n in enumerate([3, 1, 4, 1, 2])]  # each starts below the previous one's end
    check_times(sequences, 0)
    encoder = InputEncoder.fit(sequences, time_feature=0)
    within = np.concatenate([np.diff(s[:, 0]) for s in sequences])
    assert encoder.time_scale == pytest.approx(np.median(within[within > 0]))
    for index, step, fault in [(2, 3, "decrease"), (4, 1, "decrease"), (0, 0, "nan"), (3, 0, "nan"), (2, 2, "nan")]:
        broken = [s.copy() for s in sequences]
        broken[index][step, 0] = -1.0 if fault == "decrease" else np.nan
        expected = (f"sequence {index} of X has times that decrease at step {step} "
                    if fault == "decrease" else f"sequence {index} of X has no time at step {step} ")
        with pytest.raises(ValueError, match=expected):
            check_times(broken, 0)


def test_training_data_without_a_positive_gap_is_warned_of():
    """With no positive gap to learn it from, the time scale stays 1 and later gaps
    reached the network in the column's own unit: a partial_fit stream started on
    single-visit sequences in days and in years gave different models without a word."""
    X, y = visits(8)
    single_visits = [x[:1] for x in X]
    message = r"no positive gap .* reach the network unscaled, in the time column's own unit.*two or more steps"
    for first_call in (lambda model: model.partial_fit(single_visits, y, classes=[0, 1]),
                       lambda model: fit(model, single_visits, y)):  # then predicting on longer ones
        model = RNNClassifier(time_feature=0, **SMALL)
        with pytest.warns(UserWarning, match=message):
            first_call(model)
        assert model._encoder.time_scale == 1.0
    with pytest.warns(UserWarning, match=message):
        RNNRegressor(time_feature=0, **SMALL).partial_fit(single_visits, y.astype(float))
    at_one_time = [np.column_stack([np.full(3, 5.0), np.ones((3, 1))])]
    with pytest.warns(UserWarning, match=message):
        assert InputEncoder.fit(at_one_time, time_feature=0).time_scale == 1.0  # repeated times alike
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # a positive gap anywhere: the scale is learned, quietly
        InputEncoder.fit(single_visits + X[:1], time_feature=0)
        InputEncoder.fit(single_visits)  # no time column: nothing to scale


def test_decreasing_times_are_named_with_every_digit_they_need():
    # :g wrote 1700000005 after 1700000010 as "1.7e+09 after 1.7e+09": equal, in words.
    from sklearn_rnn.sequences._encoding import check_times

    for sequence, shown in [(np.array([[1700000010.0, 1.0], [1700000005.0, 2.0]]), r"1700000005\.0 after 1700000010\.0"),
                            (np.array([[1700000010, 1], [1700000005, 2]], dtype=np.uint64), "1700000005 after 1700000010"),
                            (np.array([[5.0, 1.0], [4.5, 2.0]]), r"4\.5 after 5\)")]:
        with pytest.raises(ValueError, match=rf"decrease at step 1 \({shown}"):
            check_times([sequence], 0)


def test_times_equal_up_to_rounding_are_one_time_for_the_scale_and_the_warning():
    # Three labs per visit, their times 1-2 units in the last place apart (computed two
    # ways): the median positive gap was 4e-16, every real gap reached the network as
    # 1.6e15 and every prediction was the same; the decay cell's warning of steps that
    # share a time counted exact repeats only (numerics40 review).
    from sklearn_rnn.sequences import InputEncoder

    def visits(jitter):
        t = np.repeat(0.7 * np.arange(4), 3)
        if jitter:
            t = t + np.tile([0, 1, 2], 4) * np.spacing(t + 1)
        return [np.column_stack([t, np.arange(12.0) + k]) for k in range(20)]

    exact, jittered = visits(False), visits(True)
    assert InputEncoder.fit(exact, time_feature=0).time_scale == pytest.approx(0.7)
    assert InputEncoder.fit(jittered, time_feature=0).time_scale == pytest.approx(0.7)
    y = np.arange(20.0)
    predictions = []
    for X in (exact, jittered):
        with pytest.warns(UserWarning, match="160 of the 240 training steps share the time of the step before"):
            model = RNNRegressor(time_feature=0, hidden_size=4, max_iter=2, random_state=0).fit(X, y)
        predictions.append(model.predict(X[:3]))
    np.testing.assert_allclose(predictions[1], predictions[0], rtol=1e-6)


def test_one_far_time_changes_nothing_and_whole_numbers_keep_their_gaps():
    # The same-time bound came from the largest time of all: one sentinel time of 1e17
    # made every other gap "the same time", and time_scale that outlier's gap
    # (numerics43 review; float32 times' own rounding is left open).
    rng = np.random.default_rng(0)
    X = [np.column_stack([np.cumsum(rng.uniform(0.5, 1.5, 6)), rng.normal(size=6)]) for _ in range(30)]
    alone = InputEncoder.fit(X, time_feature=0).time_scale
    with_sentinel = InputEncoder.fit(X + [np.array([[0.0, 1.0], [1e17, 2.0]])], time_feature=0).time_scale
    assert with_sentinel == pytest.approx(alone, rel=0.05)
    # Integer seconds keep their 1-second gaps, and float64 milliseconds at 2 kHz their
    # 0.5 ms (diff43 review: a float32 guess read them as one time).
    seconds = [np.column_stack([1e7 + np.arange(5.0), np.ones(5)])]
    assert InputEncoder.fit(seconds, time_feature=0).time_scale == 1.0
    milliseconds = [np.column_stack([1.2e6 + 0.5 * np.arange(8.0), np.ones(8)])] * 3
    assert InputEncoder.fit(milliseconds, time_feature=0).time_scale == 0.5


def test_the_decay_recurrence_refuses_gaps_of_another_shape_and_negative_ones():
    # (B, T, 1) gaps broadcast into (B, T, B, H) states that mixed the sequences, an
    # extra column was ignored, float64 gaps failed inside the loop, and a gap of -1
    # grew the state to 1e6 (-10: inf) in a cell that declares its state bounded.
    import torch

    from sklearn_rnn.nn import DecayRecurrence, RecurrentNetwork

    cell = DecayRecurrence(5)
    projected, gaps = torch.randn(2, 3, 5), torch.rand(2, 3)
    for wrong in (gaps[..., None], torch.cat([gaps, torch.ones(2, 1)], 1), gaps[:, 0]):
        with pytest.raises(ValueError, match=r"gaps must be a tensor of shape \(batch, steps\) = \(2, 3\)"):
            cell(projected, wrong)
    torch.testing.assert_close(cell(projected, gaps.double()), cell(projected, gaps))  # read in projected's dtype
    for bad, shown in ((-1.0, "-1.0"), (float("nan"), "nan")):
        later = gaps.clone()
        later[1, 2] = bad
        with pytest.raises(ValueError, match=rf"non-negative .* got {shown} at step 2 of sequence 1"):
            cell(projected, later)
    first = gaps.clone()
    first[:, 0] = -5.0  # the first step's gap is never read
    torch.testing.assert_close(cell(projected, first), cell(projected, gaps))
    net = RecurrentNetwork(2, 3, 1, cell="decay", gap_channel=0, generator=torch.Generator().manual_seed(0))
    x = torch.rand(1, 6, 2)
    x[0, 3, 0] = -1.0
    with pytest.raises(ValueError, match="gaps must be non-negative"):
        net(x, [6])
    x[0, 3:] = float("nan")  # padding is never read
    assert torch.isfinite(net(x, [3])).all()


def test_infinite_gaps_or_gaps_beyond_the_cells_dtype_are_refused_and_a_nan_first_gap_is_named():
    # inf passed the check (only negative and NaN were refused), and a float64 gap of 1e5
    # became inf in a float16 cell: the time since an observation turned NaN at every
    # later step, observed ones included, and hidden_decay's gradient NaN. A NaN first
    # gap (pandas' diff()) gave NaN outputs without a word (cells43 review).
    cell = DecayRecurrence(3, n_masked=1)
    x = torch.tensor([[[0.5, 1.0], [0.7, 1.0], [0.2, 1.0], [0.4, 0.0]]])
    with pytest.raises(ValueError, match=r"gaps must be non-negative and finite times .* got inf at step 1 of sequence 0"):
        cell.decay_inputs(x, torch.tensor([[0.0, float("inf"), 1.0, 1.0]]))
    with pytest.raises(ValueError, match=r"the gap 100000\.0 at step 1 of sequence 0 is beyond the range of "
                                         r"torch\.float16"):
        cell.half().decay_inputs(x.half(), torch.tensor([[0.0, 1e5, 1.0, 1.0]], dtype=torch.float64))
    net = RecurrentNetwork(2, 4, 1, cell="decay", gap_channel=1, generator=torch.Generator().manual_seed(0))
    times = torch.tensor([[0.0, 1.0, 3.0], [0.0, 2.0, 2.5]])
    gaps = torch.diff(times, dim=1, prepend=torch.full((2, 1), float("nan")))
    with pytest.raises(ValueError, match=r"gap_channel 1 holds nan at the first step of sequence 0: .* "
                                         r"\.diff\(\)\.fillna\(0\)"):
        net(torch.stack([torch.randn(2, 3), gaps], dim=-1), [3, 3])
    assert torch.isfinite(net(torch.stack([torch.randn(2, 3), gaps.nan_to_num(0.0)], dim=-1), [3, 3])).all()


def test_the_decay_recurrence_refuses_inputs_of_another_shape():
    # A (batch, steps) input let sequence 1's inputs change sequence 0's states (1.8
    # apart), and x with fewer channels than values and masks put one mask on several
    # values (cells43 review).
    cell = DecayRecurrence(2)
    with pytest.raises(ValueError, match=r"projected must be a tensor of shape \(batch, steps, 2\).*got \(2, 3\)"):
        cell(torch.ones(2, 3), torch.ones(2, 3))
    with pytest.raises(ValueError, match=r"got \(2, 3, 1\)"):
        cell(torch.ones(2, 3, 1), torch.ones(2, 3))
    masked = DecayRecurrence(4, n_masked=2)
    with pytest.raises(ValueError, match=r"x must be .*at least 4\); got \(1, 3, 3\)"):
        masked.decay_inputs(torch.ones(1, 3, 3), torch.ones(1, 3))


def test_times_that_decrease_by_rounding_only_are_told_so():
    # 0.3 after 0.1 + 0.2 is refused as a decrease, which the rest of the package reads
    # as one time: the message says the two differ only by rounding (numerics43).
    X = [np.array([[0.1 + 0.2, 1.0], [0.3, 2.0], [1.0, 3.0]]), np.array([[0.0, 1.0], [1.0, 2.0]])]
    with pytest.raises(ValueError, match=r"decrease at step 1 \(0\.3 after 0\.30000000000000004\).*these two differ "
                                         r"only by rounding"):
        RNNRegressor(time_feature=0, max_iter=1).fit(X, [1.0, 2.0])
    with pytest.raises(ValueError, match=r"decrease at step 1 \(0\.2 after 0\.3\).* by time\. \(These"):
        RNNRegressor(time_feature=0, max_iter=1).fit([np.array([[0.3, 1.0], [0.2, 2.0]])] * 2, [1.0, 2.0])
