"""instance_norm: channels read per sequence, for series whose amplitudes differ by
orders of magnitude (PLAID's case in the defaults study)."""

import json
import warnings

import numpy as np
import pytest
from safetensors import safe_open
from safetensors.torch import save_file
from sklearn.exceptions import ConvergenceWarning

import sklearn_rnn
from sklearn_rnn import RNNClassifier, RNNRegressor, RNNStepClassifier
from sklearn_rnn.sequences import InputEncoder

TINY = dict(hidden_size=5, max_iter=3, batch_size=8, random_state=0)


def fit(model, X, y):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return model.fit(X, y)


def shapes(n, seed, low=-5.0, high=1.0):
    """Two classes told apart by their shape only (a sine or a square wave), each series
    at an amplitude drawn over ``10**low`` to ``10**high``."""
    rng = np.random.default_rng(seed)
    X, y = [], []
    for _ in range(n):
        label = int(rng.integers(2))
        t = np.arange(int(rng.integers(40, 80))) / 3.0
        wave = np.sin(t) if label else np.sign(np.sin(t))
        X.append((10 ** rng.uniform(low, high) * (wave + 0.1 * rng.normal(size=len(t))))[:, None])
        y.append(label)
    return X, np.array(y)


def test_a_scaled_channel_is_each_sequence_on_its_own_scale_with_its_level_and_scale_beside():
    rng = np.random.default_rng(0)
    X = [rng.normal(loc=3.0, size=(int(rng.integers(3, 9)), 2)) * [1.0, 10.0 ** k] for k in range(-3, 3)]
    encoder = InputEncoder.fit(X, scaled=[1])
    assert encoder.n_inputs == 2 + 2 and encoder.gap_channel is None
    encoded = encoder.encode_arrays(X)
    levels = np.array([x[:, 1].mean() for x in X])
    log_scales = np.log([x[:, 1].std() for x in X])
    for x, steps, level, log_scale in zip(X, encoded, levels, log_scales):
        np.testing.assert_array_equal(steps[:, 0], x[:, 0])  # not scaled: as given
        np.testing.assert_allclose(steps[:, 1], (x[:, 1] - level) / x[:, 1].std())
        np.testing.assert_allclose(steps[:, 2], (level - levels.mean()) / levels.std())
        np.testing.assert_allclose(steps[:, 3], (log_scale - log_scales.mean()) / log_scales.std())
    # A series and the same series a million times larger: the same shape, another scale.
    twice = encoder.encode_arrays([X[0], 1e6 * X[0]])
    np.testing.assert_allclose(twice[0][:, 1], twice[1][:, 1])
    np.testing.assert_allclose(twice[1][:, 3] - twice[0][:, 3], np.log(1e6) / log_scales.std())
    # Encoding leaves the caller's arrays as they were.
    before = [x.copy() for x in X]
    encoder.encode_arrays(X)
    for x, kept in zip(X, before):
        np.testing.assert_array_equal(x, kept)


def test_missing_values_flat_and_one_step_sequences_are_read_per_sequence_without_nan():
    X = [
        np.array([[1.0], [np.nan], [3.0]]),  # a gap: skipped by the statistics, filled after
        np.array([[np.nan], [np.nan]]),  # nothing observed: the training mean of level and scale
        np.array([[5.0], [5.0], [5.0]]),  # flat: values 0, its log scale the typical one
        np.array([[2.0]]),  # one step: the same
    ]
    encoder = InputEncoder.fit(X, scaled=[0])
    assert encoder.use_mask and encoder.n_inputs == 1 + 1 + 2
    encoded = encoder.encode_arrays(X)
    assert all(np.isfinite(steps).all() for steps in encoded)
    np.testing.assert_allclose(encoded[0][:, 0], [-1.0, -1.0, 1.0])  # carried forward
    np.testing.assert_array_equal(encoded[0][:, 1], [1.0, 0.0, 1.0])  # the mask
    np.testing.assert_array_equal(encoded[1][:, 2:], 0.0)  # the training mean of each statistic
    np.testing.assert_array_equal(encoded[2][:, 0], 0.0)
    np.testing.assert_array_equal(encoded[3][:, 0], 0.0)
    # No spread: the typical log scale (0 once standardized), not log(1e-8 of the unit).
    assert encoded[2][0, 3] == encoded[3][0, 3] == 0.0
    with pytest.raises(ValueError, match=r"scaled must name distinct value channels in \[0, 0\].*got \[1\]"):
        InputEncoder.fit(X, scaled=[1])


def test_the_time_column_is_never_scaled_and_the_gap_channel_follows_the_statistics():
    rng = np.random.default_rng(1)
    X = [np.column_stack([np.cumsum(rng.uniform(1, 2, size=5)), 10.0 ** k * rng.normal(size=5)])
         for k in range(-4, 2)]
    encoder = InputEncoder.fit(X, time_feature=0, scaled=[0])
    assert encoder.n_values == 1 and encoder.gap_channel == 3 and encoder.n_inputs == 5
    unscaled = InputEncoder.fit(X, time_feature=0).encode_arrays(X)
    for steps, plain in zip(encoder.encode_arrays(X), unscaled):
        np.testing.assert_array_equal(steps[:, 3:], plain[:, 1:])  # gap and elapsed time
    assert InputEncoder.nearly_flat_channels(X, time_feature=0) == (0,)


def test_nearly_flat_channels_are_those_whose_typical_sequence_is_flat_at_the_shared_scale():
    rng = np.random.default_rng(2)
    amplitudes = 10.0 ** rng.uniform(-5, 1, size=60)
    X = [np.column_stack([
        a * rng.normal(size=20),  # amplitudes over six orders of magnitude: nearly flat
        rng.normal(size=20),  # one scale for all
        np.full(20, rng.normal()),  # constant within each sequence (a covariate)
        a * rng.normal(size=20) + 1e3 * (i == 0),  # flat, but one sequence far off: still flat
    ]) for i, a in enumerate(amplitudes)]
    assert InputEncoder.nearly_flat_channels(X) == (0, 3)
    assert InputEncoder.nearly_flat_channels(X, ratio=1e-9) == ()


def test_auto_reads_series_of_very_different_amplitudes_per_sequence_and_learns_their_shapes():
    X, y = shapes(240, seed=0)
    X_test, y_test = shapes(200, seed=1)
    params = dict(random_state=0, max_iter=15, hidden_size=16)
    auto = fit(RNNClassifier(**params), X, y)
    assert auto._encoder.scaled == (0,) and auto._encoder.n_inputs == 3
    plain = fit(RNNClassifier(instance_norm=False, **params), X, y)
    assert plain._encoder.scaled == ()
    assert auto.score(X_test, y_test) >= 0.95
    assert auto.score(X_test, y_test) >= plain.score(X_test, y_test) + 0.05
    # One shared scale: 'auto' reads none per sequence, and the fit is the one it was.
    X_same, _ = shapes(60, seed=2, low=0.0, high=0.3)
    same = fit(RNNClassifier(**TINY), X_same, y[:60])
    off = fit(RNNClassifier(instance_norm=False, **TINY), X_same, y[:60])
    assert same._encoder.scaled == ()
    np.testing.assert_array_equal(same.predict_proba(X_same), off.predict_proba(X_same))


def test_auto_reads_none_per_sequence_with_time_simplex_or_steps_and_true_reads_every_value_channel():
    X, y = shapes(24, seed=3)
    timed = [np.column_stack([np.arange(len(x), dtype=float), x]) for x in X]
    assert fit(RNNClassifier(time_feature=0, **TINY), timed, y)._encoder.scaled == ()
    assert fit(RNNClassifier(optimizer="simplex", **TINY), X, y)._encoder.scaled == ()
    assert fit(RNNClassifier(cell="tanh", **TINY), X, y)._encoder.scaled == (0,)
    both = fit(RNNRegressor(instance_norm=True, time_feature=0, **TINY), timed, y.astype(float))
    assert both._encoder.scaled == (0,) and both._encoder.gap_channel == 3
    assert np.isfinite(both.predict(timed)).all()
    steps = [np.repeat(label, len(x))[:, None] for x, label in zip(X, y)]
    assert fit(RNNStepClassifier(**TINY), X, steps)._encoder.scaled == ()
    refused = RNNStepClassifier(instance_norm=True, **TINY)
    with pytest.raises(ValueError, match=r"instance_norm=True reads each sequence.s mean .* use instance_norm=False.*SequenceStandardScaler\(\), not per_sequence=True"):
        refused.fit(X, steps)
    assert not hasattr(refused, "net_")


def test_long_series_are_framed_after_their_channel_is_found_flat():
    X, y = shapes(40, seed=4)
    long = [np.repeat(x, 4, axis=0) for x in X]  # median length about 240 raw steps: frame 2
    clf = fit(RNNClassifier(**TINY), long, y)
    assert clf._frame == 2 and clf._encoder.scaled == (0, 1)  # both columns of a frame
    assert clf._encoder.n_inputs == 2 + 2 * 2


def test_a_model_read_per_sequence_saves_and_loads_and_a_forged_statistic_is_refused(tmp_path):
    X, y = shapes(30, seed=5)
    clf = fit(RNNClassifier(**TINY), X, y)
    path = tmp_path / "clf.safetensors"
    clf.save(path)
    loaded = RNNClassifier.load(path)
    assert loaded._encoder.scaled == (0,)
    np.testing.assert_array_equal(loaded._encoder.level_stats, clf._encoder.level_stats)
    np.testing.assert_array_equal(loaded.predict_proba(X), clf.predict_proba(X))
    fit(loaded.set_params(warm_start=True), X, y)  # 'auto' continues with what the fit chose

    from sklearn_rnn._persistence import _digest

    with safe_open(str(path), framework="pt") as handle:
        tensors = {key: handle.get_tensor(key) for key in handle.keys()}
        header = json.loads(handle.metadata()["sklearn_rnn"])
    for field in ("scale_floor", "level_stats", "scaled"):
        forged_header = json.loads(json.dumps(header))
        pairs = forged_header["state"]["encoder"]["pairs"]
        if field == "scale_floor":  # a floor of 0 would divide a flat sequence by 0
            dict(pairs)["scale_floor"]["items"] = [0.0]
        elif field == "level_stats":  # the statistics of a scaled channel, but not all of them
            pairs[:] = [pair for pair in pairs if pair[0] != "level_stats"]
        else:  # a channel the sequences do not have (one value channel)
            pairs[:] = [[key, [1] if key == "scaled" else item] for key, item in pairs]
        forged_header["sha256"] = _digest(forged_header, tensors)
        forged = tmp_path / "forged.safetensors"
        save_file(tensors, str(forged), metadata={"sklearn_rnn": json.dumps(forged_header)})
        with pytest.raises(ValueError, match="encoder"):
            sklearn_rnn.load(forged)


def test_a_channel_never_observed_in_training_is_read_per_sequence_without_a_stray_warning():
    # Its pooled standard deviation came from np.nanstd over nothing: numpy's "Degrees of
    # freedom <= 0 for slice" RuntimeWarning at every such fit.
    X = [np.array([[1.0, np.nan], [2.0, np.nan]]), np.array([[3.0, np.nan]])]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        encoder = InputEncoder.fit(X, scaled=[0, 1])
        encoded = encoder.encode_arrays(X)
    assert encoder.scale_floor[1] == 1e-8  # a spread of 1 for the channel with none
    assert np.all(np.concatenate(encoded)[:, [1, 3]] == 0.0)  # its value and its mask: nothing seen


def test_levels_and_scales_equal_up_to_rounding_are_not_blown_up_at_prediction():
    # Sines over whole periods all have the mean 0 up to rounding (about 1e-17 apart):
    # that spread standardized the level channel, so an offset of 1e-3 at prediction
    # became an input of 2.8e13 and every prediction the same.
    rng = np.random.default_rng(0)
    t = np.linspace(0, 4 * np.pi, 32, endpoint=False)
    X = [a * np.sin(f * t)[:, None] for a, f in zip(10.0 ** rng.uniform(-4, 1, 40), rng.integers(1, 3, 40))]
    encoder = InputEncoder.fit(X, scaled=[0])
    level = encoder.n_values  # the level channel follows the values (no masks)
    assert np.abs([x[0, level] for x in encoder.encode_arrays(X)]).max() < 1e-8
    shifted = encoder.encode_arrays([X[0] + 1e-3])[0]
    assert 0 < shifted[0, level] < 1e-2  # the offset in units of the channel's spread
    # Every sequence standardized on its own has a scale of 1 up to rounding: a log
    # scale of 0, and a sequence twice as wide reads log(2), not log(2) / 1e-16.
    Z = [(x - x.mean()) / x.std() for x in X]
    encoder = InputEncoder.fit(Z, scaled=[0])
    log_scale = encoder.n_values + 1
    assert np.abs([z[0, log_scale] for z in encoder.encode_arrays(Z)]).max() < 1e-8
    assert encoder.encode_arrays([2 * Z[0]])[0][0, log_scale] == pytest.approx(np.log(2))


def test_a_channel_read_per_sequence_keeps_the_fractions_of_integer_input():
    # The scaled values went back into the integer array: -1.07, -0.27, 1.34 became -1, 0, 1.
    integers = [np.array([[1], [2], [4]]), np.array([[10], [20], [50]])]
    floats = [x.astype(float) for x in integers]
    for got, expected in zip(InputEncoder.fit(integers, scaled=[0]).encode_arrays(integers),
                             InputEncoder.fit(floats, scaled=[0]).encode_arrays(floats)):
        np.testing.assert_array_equal(got, expected)
    assert integers[0].dtype.kind == "i" and integers[0][2, 0] == 4  # the caller's arrays as they were


def test_float32_data_standardized_per_series_reads_a_wider_series_as_its_log_ratio():
    # Per-series z-normalized float32 data (as most UCR/UEA sets): the log scales differ
    # by float32 rounding, about 1e-8, above the first bound (1e-8 of an e-fold), so a
    # series 1% wider read 8.6e5 (numerics40 review).
    rng = np.random.default_rng(0)
    t = np.linspace(0, 4 * np.pi, 32, endpoint=False)
    X = [a * np.sin(f * t)[:, None] for a, f in zip(10.0 ** rng.uniform(-4, 1, 40), rng.integers(1, 3, 40))]
    Z = [((x - x.mean()) / x.std()).astype(np.float32) for x in X]
    encoder = InputEncoder.fit(Z, scaled=[0])
    log_scale = encoder.n_values + 1
    assert encoder.encode_arrays([1.01 * Z[0]])[0][0, log_scale] == pytest.approx(np.log(1.01), rel=1e-3)


def test_a_channel_constant_up_to_rounding_reads_changes_in_its_own_units():
    # A dose of 0.1, some rows computed as 0.3 / 3 (one unit in the last place off): its
    # pooled spread, 1e-17, was the unit of its level, and a dose 0.1% higher read 1e13.
    rng = np.random.default_rng(0)
    X = [np.column_stack([rng.normal(size=10), np.where(rng.random(10) < 0.5, 0.1, 0.3 / 3)]) for _ in range(40)]
    encoder = InputEncoder.fit(X, scaled=[0, 1])
    level = encoder.n_values + 1  # the second channel's level
    shifted = encoder.encode_arrays([np.column_stack([X[0][:, 0], np.full(10, 0.1001)])])[0]
    assert shifted[0, level] == pytest.approx(1e-4, rel=1e-6)  # the change itself, in a unit of 1


def test_a_sequence_constant_up_to_rounding_reads_as_flat_at_a_large_level():
    # One unit in the last place on every other step of a sequence at 1e9 read as a
    # shape of +-1.4 (the per-sequence floor is relative to the channel's spread, not
    # to the level); it now reads as the constant sequence does.
    rng = np.random.default_rng(0)
    sequences = [1e9 + amplitude * rng.standard_normal((30, 1)) for amplitude in np.logspace(-3, 1, 20)]
    encoder = InputEncoder.fit(sequences, scaled=[0])
    noisy = np.full((30, 1), 1e9)
    noisy[::2] += np.spacing(1e9)
    got, constant = encoder.encode_arrays([noisy, np.full((30, 1), 1e9)])
    np.testing.assert_array_equal(got, constant)
    assert not got[:, 0].any()
    shaped = np.full((30, 1), 1e9)
    shaped[::2] += 1e-3  # a real shape, however small, is still read
    assert np.abs(encoder.encode_arrays([shaped])[0][:, 0]).max() > 0.5


def test_auto_scales_every_frame_position_of_a_feature_or_none():
    # Each framed column was judged alone: the feature's even raw steps were read per
    # sequence and its odd ones raw, one feature on two scales alternating step by step.
    rng = np.random.default_rng(5)
    X = [np.c_[a * rng.normal(size=200)] for a in 10.0 ** rng.uniform(-2, 1, 30)]
    clf = fit(RNNClassifier(**TINY), X, np.arange(30) % 2)
    assert clf._frame == 2 and clf._encoder.scaled == (0, 1)


def test_a_flat_or_one_step_sequence_reads_its_log_scale_as_typical():
    # Its spread of 0 was floored at 1e-8 of the channel's unit: a log-scale channel of -37
    # to -105 that drowned the level (constant sequences at -2, 0, 2 predicted 0.09, 0.54,
    # 0.73 by a model of the mean), and one one-step training sequence squeezed the
    # others' log scales 7-fold.
    from sklearn_rnn.sequences import InputEncoder

    rng = np.random.default_rng(0)
    X = [rng.normal(size=(10, 1)) * a for a in (0.5, 1.0, 2.0, 4.0)]
    encoder = InputEncoder.fit(X, scaled=[0])
    flat = encoder.encode_arrays([np.full((5, 1), 3.0), np.array([[7.0]])])
    assert [float(x[0, -1]) for x in flat] == [0.0, 0.0]  # the log-scale channel
    with_one_step = InputEncoder.fit(X + [np.array([[1.0]])], scaled=[0])
    np.testing.assert_allclose(with_one_step.log_scale_stats, encoder.log_scale_stats)


@pytest.mark.parametrize("level, dtype", [(1e11 / 3, np.float64)])
def test_levels_equal_up_to_the_rounding_of_a_large_level_are_not_blown_up(level, dtype):
    # Small oscillations around a large baseline (pressure in hPa, kelvins, counters):
    # the levels differ by the rounding of the level itself, which passed the bound tied
    # to the channel's pooled spread, and an offset of 0.01 read 2368 at a level of 3e10
    # (numerics43 review; float32 data's own rounding is left open: the estimators'
    # float64 copy no longer says the data were float32).
    rng = np.random.default_rng(0)
    t = np.linspace(0, 4 * np.pi, 32, endpoint=False)
    X = [(level + a * np.sin(f * t))[:, None].astype(dtype)
         for a, f in zip(10.0 ** rng.uniform(-3, 0, 40), rng.integers(1, 3, 40))]
    encoder = InputEncoder.fit(X, scaled=[0])
    shifted = encoder.encode_arrays([X[0].astype(np.float64) + 0.01])[0]
    assert abs(shifted[0, encoder.n_values]) < 0.2  # 0.01 in units of the pooled spread (about 0.2)


def test_a_sequence_whose_squares_overflow_keeps_its_shape_and_log_scale():
    # At an amplitude of 1e160 the squared deviations overflowed: the shape read all 0
    # and the log scale 1.8e308 (numerics43 review).
    rng = np.random.default_rng(0)
    X = [a * rng.normal(size=(8, 1)) for a in 10.0 ** rng.uniform(-3, 3, 30)]
    encoder = InputEncoder.fit(X, scaled=[0])
    shape = np.array([[1.0], [-1.0], [2.0], [-2.0]])
    small, huge = encoder.encode_arrays([1e150 * shape, 1e160 * shape])
    np.testing.assert_allclose(huge[:, 0], small[:, 0])  # the same shape
    log_scale = encoder.n_values + 1
    assert huge[0, log_scale] - small[0, log_scale] == pytest.approx(np.log(1e10) / encoder.log_scale_stats[1, 0])


def test_levels_that_really_differ_at_a_large_magnitude_keep_their_spread():
    # diff43 review: a float32 bound on float64 data read levels 5e6 apart by about 3 as
    # rounding (a spread of 10.1 against 3.45).
    rng = np.random.default_rng(0)
    X = [(5e6 + 3 * k + rng.normal(size=6))[:, None] for k in range(4)] * 5
    encoder = InputEncoder.fit(X, scaled=[0])
    levels = [x.mean() for x in X]
    assert encoder.level_stats[1, 0] == pytest.approx(np.std(levels), rel=1e-6)
