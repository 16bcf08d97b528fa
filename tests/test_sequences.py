"""The data layer: accepted forms, batching by length, encoding of missing values, scaling."""

import warnings

import numpy as np
import pandas as pd
import pytest
import torch
from sklearn.exceptions import ConvergenceWarning

from sklearn_rnn import RNNClassifier, SequenceStandardScaler
from sklearn_rnn.sequences import (
    BucketBatchLoader,
    FlatSequences,
    InputEncoder,
    SequenceDataset,
    balanced_batches,
    bucket_batches,
    check_sequences,
    input_layout,
    restore_layout,
    sequence_column,
)

RAGGED = [np.array([[1.0, 2.0], [3.0, 4.0]]), np.array([[5.0, 6.0]]), np.array([[7.0, 8.0], [np.nan, 9.0], [1.0, 1.0]])]


def test_every_form_gives_the_same_canonical_sequences():
    padded = restore_layout(RAGGED, "padded")
    assert padded.shape == (3, 3, 2)
    for form in (RAGGED, tuple(RAGGED), padded, sequence_column(RAGGED), pd.Series(RAGGED, dtype=object)):
        result = check_sequences(form)
        assert [s.shape for s in result] == [(2, 2), (1, 2), (3, 2)]
        for got, expected in zip(result, RAGGED, strict=True):
            np.testing.assert_array_equal(got, expected)


def test_table_rows_are_univariate_sequences_with_trailing_nan_padding():
    table = np.array([[1.0, 2.0, np.nan], [3.0, np.nan, 4.0]])
    assert input_layout(table) == "table"
    result = check_sequences(table)
    np.testing.assert_array_equal(result[0].ravel(), [1.0, 2.0])
    np.testing.assert_array_equal(result[1].ravel(), [3.0, np.nan, 4.0])
    np.testing.assert_array_equal(restore_layout(result, "table"), table)


def test_leading_and_inner_nan_rows_are_missing_values_not_padding():
    sequence = np.array([[np.nan], [1.0], [np.nan], [2.0], [np.nan]])
    (result,) = check_sequences([sequence])
    np.testing.assert_array_equal(result, sequence[:4])


def test_masked_entries_are_missing_values_and_dates_are_refused():
    # np.asarray dropped the mask: the value under it (99) reached the network.
    masked = np.ma.masked_array([[1.0], [99.0], [3.0]], mask=[[0], [1], [0]])
    np.testing.assert_array_equal(check_sequences([masked])[0].ravel(), [1.0, np.nan, 3.0])
    padded = np.ma.masked_array(np.ones((2, 3, 1)), mask=np.zeros((2, 3, 1)))
    padded[0, 2, 0] = np.ma.masked  # a masked last step is padding, as a NaN one is
    assert [len(x) for x in check_sequences(padded)] == [2, 3]
    table = np.ma.masked_array(np.ones((12, 3)), mask=np.eye(12, 3))
    clf = RNNClassifier(hidden_size=2, max_iter=1, random_state=0).fit(table, np.arange(12) % 2)
    assert clf._encoder.use_mask  # scikit-learn's validation of a table kept the masked values
    # Dates and durations were read as counts of their own unit (days since 1970 here).
    for dates in (np.array(["2024-01-01", "2024-01-03"], dtype="datetime64[D]"),
                  np.array([1, 2], dtype="timedelta64[s]")):
        with pytest.raises(TypeError, match=r"sequence 0 of X holds dates or durations .*np.timedelta64\(1, 'D'\)"):
            check_sequences([dates.reshape(-1, 1)])


def test_missing_values_after_a_fit_without_any_are_filled_with_a_warning():
    rng = np.random.default_rng(0)
    X = [rng.normal(size=(5, 2)) for _ in range(8)]
    y = np.arange(8) % 2
    holed = [x.copy() for x in X]
    holed[3][2, 1] = np.nan
    clf = RNNClassifier(hidden_size=3, max_iter=1, random_state=0).partial_fit(X, y, classes=[0, 1])
    assert not clf._encoder.use_mask
    for call in (lambda: clf.partial_fit(holed, y), lambda: clf.predict(holed)):
        with pytest.warns(UserWarning, match=r"X holds missing values \(NaN\), but the training data had none"):
            call()
    masked = RNNClassifier(hidden_size=3, max_iter=1, random_state=0).fit(holed, y)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        clf.predict(X)  # none without missing values
        masked.predict(holed)  # nor with masks



def test_a_prediction_in_chunks_warns_of_unmasked_missing_values_once(monkeypatch):
    """Prediction encodes X in chunks; each chunk holding a NaN repeated the warning."""
    import sklearn_rnn._estimators as estimators

    rng = np.random.default_rng(0)
    X = [rng.normal(size=(5, 2)) for _ in range(40)]
    clf = RNNClassifier(hidden_size=3, max_iter=1, random_state=0).partial_fit(X, np.arange(40) % 2, classes=[0, 1])
    holed = [x.copy() for x in X]
    for x in holed[::7]:  # in several chunks
        x[2, 1] = np.nan
    monkeypatch.setattr(estimators, "PREDICT_CHUNK_VALUES", 20)  # two sequences a chunk
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        clf.predict(holed)
    messages = [str(w.message) for w in caught if "missing values (NaN)" in str(w.message)]
    assert len(messages) == 1, messages

def test_input_is_never_modified_and_output_is_a_copy():
    original = [s.copy() for s in RAGGED]
    result = check_sequences(RAGGED)
    result[0][0, 0] = 100.0
    for got, expected in zip(RAGGED, original, strict=True):
        np.testing.assert_array_equal(got, expected)


def test_layouts():
    assert input_layout([np.zeros((2, 1))]) == "sequences"
    assert input_layout([]) == "sequences"
    assert input_layout([[1.0, 2.0], [3.0, 4.0]]) == "table"  # a list of rows, as in scikit-learn
    assert input_layout(np.zeros((2, 3, 1))) == "padded"
    assert input_layout(pd.DataFrame({"a": [1.0]})) == "table"
    assert input_layout(sequence_column(RAGGED)) == "sequences"


def test_restore_layout_keeps_containers():
    assert isinstance(restore_layout(RAGGED, "sequences", like=tuple(RAGGED)), tuple)
    column = restore_layout(RAGGED, "sequences", like=sequence_column(RAGGED))
    assert column.shape == (3, 1) and column.dtype == object
    frame = pd.DataFrame([[1.0, 2.0]], columns=["t0", "t1"], index=["p"])
    back = restore_layout(check_sequences(frame), "table", like=frame)
    assert list(back.columns) == ["t0", "t1"] and list(back.index) == ["p"]


# ------------------------------------------------------------------ batching
def test_flat_sequences_batch_is_right_padded_with_zeros():
    flat = FlatSequences.from_arrays([np.array([[1.0], [2.0], [3.0]]), np.array([[4.0]])])
    x, lengths = flat.batch(np.array([1, 0]))
    assert x.shape == (2, 3, 1)
    assert x[..., 0].tolist() == [[4.0, 0.0, 0.0], [1.0, 2.0, 3.0]]
    assert lengths.tolist() == [1, 3]


def test_flat_sequences_batch_pads_with_zeros_after_an_infinite_or_nan_last_value():
    # Padding was the last valid row times 0: NaN after an infinite value (1e39 is inf
    # in float32), which a plain PyTorch model's backward then turned into NaN gradients.
    # (Built from its values: from_arrays refuses NaN, which a caller may still store.)
    flat = FlatSequences(torch.tensor([[1.0], [1e39], [1.0], [1.0], [1.0], [1.0], [np.nan]]), torch.tensor([2, 4, 1]))
    x, lengths = flat.batch(np.array([0, 1, 2]))
    assert x.dtype == flat.values.dtype
    expected = torch.tensor([[1.0, np.inf, 0.0, 0.0], [1.0, 1.0, 1.0, 1.0], [np.nan, 0.0, 0.0, 0.0]])
    torch.testing.assert_close(x[..., 0], expected.to(x.dtype), rtol=0, atol=0, equal_nan=True)  # NaN: a valid step
    assert lengths.tolist() == [2, 4, 1]


def test_flat_sequences_batch_of_equal_lengths_is_a_gather_of_the_same_values():
    rng = np.random.default_rng(0)
    arrays = [rng.normal(size=(4, 3)) for _ in range(5)]
    flat = FlatSequences.from_arrays(arrays)
    assert flat.common_length == 4
    x, lengths = flat.batch(np.array([3, 0, 4]))
    assert torch.equal(x, torch.as_tensor(np.stack([arrays[3], arrays[0], arrays[4]]), dtype=torch.float32))
    assert lengths.tolist() == [4, 4, 4]
    x[0] = 0.0  # a copy: the stored steps stay as they were
    assert torch.equal(flat.batch(np.array([3]))[0][0], torch.as_tensor(arrays[3], dtype=torch.float32))
    assert FlatSequences.from_arrays([np.ones((2, 1)), np.ones((3, 1))]).common_length is None


def test_checked_sequences_are_encoded_from_their_one_array_without_sharing_it():
    from sklearn_rnn.sequences._validation import joined_steps

    rng = np.random.default_rng(0)
    checked = check_sequences([rng.normal(size=(n, 2)) for n in (3, 1, 4)])
    steps, lengths, shared = joined_steps(checked)
    assert shared and lengths.tolist() == [3, 1, 4] and np.shares_memory(steps, checked[2])
    encoder = InputEncoder.fit(checked)
    for dtype in (torch.float32, torch.float64):
        fast, joined = encoder.encode(checked, dtype=dtype), encoder.encode(list(checked), dtype=dtype)
        assert torch.equal(fast.values, joined.values) and torch.equal(fast.lengths, joined.lengths)
        assert not np.shares_memory(fast.values.numpy(), steps)
    changed = list(checked)
    checked[1] = np.full((2, 2), 7.0)  # no longer the cut: joined anew
    steps, lengths, shared = joined_steps(checked)
    assert not shared and lengths.tolist() == [3, 2, 4] and steps[3:5].tolist() == [[7.0, 7.0]] * 2
    assert not joined_steps(changed)[2]


def test_flat_sequences_subset_keeps_order_and_values():
    arrays = [np.full((n, 2), float(n)) for n in (3, 1, 4, 2)]
    subset = FlatSequences.from_arrays(arrays).subset(np.array([2, 0]))
    x, lengths = subset.batch(np.array([0, 1]))
    assert lengths.tolist() == [4, 3]
    assert x[0, :, 0].tolist() == [4.0] * 4 and x[1, :3, 0].tolist() == [3.0] * 3


def test_bucket_batches_cover_every_sample_once_and_shuffle_between_epochs():
    lengths = np.random.default_rng(0).integers(1, 50, size=1000)
    rng = np.random.default_rng(1)
    first = bucket_batches(lengths, 32, shuffle=True, rng=rng)
    second = bucket_batches(lengths, 32, shuffle=True, rng=rng)
    assert np.array_equal(np.sort(np.concatenate(first)), np.arange(1000))
    assert not all(np.array_equal(a, b) for a, b in zip(first, second, strict=False))
    assert max(len(b) for b in first) == 32


def padded_steps(batches, lengths):
    return sum(len(b) * lengths[b].max() for b in batches)


@pytest.mark.parametrize("seed", range(5))
def test_bounded_batches_keep_padding_within_the_bound_and_cover_every_sample(seed):
    rng = np.random.default_rng(seed)
    lengths = np.concatenate([rng.integers(5, 40, 300), rng.integers(2000, 20000, 3)])
    rng.shuffle(lengths)
    batches = bucket_batches(lengths, 32, max_padding=2)
    assert np.array_equal(np.sort(np.concatenate(batches)), np.arange(len(lengths)))
    for batch in batches:
        assert 1 <= len(batch) <= 32
        assert len(batch) == 1 or len(batch) * lengths[batch].max() <= 2 * lengths[batch].sum()
    assert padded_steps(batches, lengths) <= 2 * lengths.sum()
    assert padded_steps(bucket_batches(lengths, 32), lengths) > 3 * lengths.sum()  # without the bound
    # Lengths that never break the bound give the plain cut.
    even = rng.integers(20, 30, 200)
    assert all(np.array_equal(a, b) for a, b in zip(bucket_batches(even, 32, max_padding=2),
                                                     bucket_batches(even, 32), strict=True))


def test_prediction_runs_a_far_longer_sequence_in_a_batch_of_its_own(monkeypatch):
    import sklearn_rnn._inference as inference

    rng = np.random.default_rng(0)
    X = [rng.normal(size=(int(rng.integers(20, 40)), 2)) for _ in range(40)] + [rng.normal(size=(3000, 2))]
    y = np.arange(41) % 2
    clf = RNNClassifier(hidden_size=4, max_iter=1, conv_kernels=None, random_state=0).fit(X, y)
    seen = []

    def recording(*args, **kwargs):
        batches = bucket_batches(*args, **kwargs)
        seen.extend(batches)
        return batches

    monkeypatch.setattr(inference, "bucket_batches", recording)
    proba = clf.predict_proba(X)
    assert [40] in [batch.tolist() for batch in seen]  # the long one, alone
    assert max(len(batch) for batch in seen) == 32
    np.testing.assert_allclose(clf.set_params(batch_size=1).predict_proba(X), proba, atol=1e-12)


@pytest.mark.parametrize("shuffle", [False, True])
def test_epoch_cost_follows_total_steps_not_n_times_longest(shuffle):
    # Heavy-tailed lengths: median 20, a few up to 1000.
    rng = np.random.default_rng(0)
    lengths = np.minimum(np.ceil(rng.lognormal(np.log(20), 1.0, size=5000)), 1000).astype(int)
    batches = bucket_batches(lengths, 64, shuffle=shuffle, rng=np.random.default_rng(2))
    total = lengths.sum()
    # Sorted: within 10% of the total; shuffled pools of 50 batches: within 25%.
    assert padded_steps(batches, lengths) < (1.25 if shuffle else 1.1) * total
    # Random batches would pay for the longest member of every batch:
    random_batches = np.array_split(rng.permutation(len(lengths)), len(lengths) // 64)
    assert padded_steps(random_batches, lengths) > 3 * total


def test_loader_yields_inputs_targets_and_weights():
    data = SequenceDataset(
        FlatSequences.from_arrays([np.ones((n, 1)) for n in (3, 1, 2)]),
        torch.tensor([0, 1, 2]),
        torch.tensor([1.0, 2.0, 3.0]),
    )
    batches = list(BucketBatchLoader(data, batch_size=2))
    assert len(batches) == len(BucketBatchLoader(data, batch_size=2)) == 2
    inputs, y = batches[0]
    assert inputs["lengths"].tolist() == [1, 2] and y.tolist() == [1, 2]
    assert inputs["sample_weight"].tolist() == [2.0, 3.0]
    shuffled = BucketBatchLoader(data, batch_size=2, shuffle=True, random_state=np.random.default_rng(0))
    assert len(shuffled) == sum(1 for _ in shuffled)
    # The loader's own parameter is named (it was "bucket_batches(shuffle=True) needs ... rng").
    with pytest.raises(ValueError, match=r"BucketBatchLoader\(shuffle=True\) needs a numpy Generator as random_state"):
        list(BucketBatchLoader(data, batch_size=2, shuffle=True))
    # A seed failed at the first draw: "'int' object has no attribute 'permutation'" (enc44).
    with pytest.raises(ValueError, match=r"BucketBatchLoader draws from random_state, which must be a "
                                         r"numpy.random.Generator; got 0 of type int\. Pass "
                                         r"random_state=numpy.random.default_rng\(0\)"):
        BucketBatchLoader(data, batch_size=2, shuffle=True, random_state=0)
    with pytest.raises(ValueError, match=r"bucket_batches\(shuffle=True\) draws from rng, .* got 3 of type int"):
        bucket_batches(np.array([1, 2, 3]), 2, shuffle=True, rng=3)
    with pytest.raises(ValueError, match=r"balanced_batches draws from rng, .* got None"):
        balanced_batches(np.array([1, 2]), np.array([0, 1]), 2, rng=None)


# ------------------------------------------------------------------ encoding
def test_encoder_carries_last_observation_forward_and_adds_masks():
    train = [np.array([[1.0, 10.0], [np.nan, 20.0]]), np.array([[3.0, np.nan]])]
    encoder = InputEncoder.fit(train)
    np.testing.assert_allclose(encoder.fill_values, [2.0, 15.0])
    assert encoder.use_mask and encoder.n_inputs == 4
    first, second = encoder.encode_arrays([np.array([[np.nan, 5.0], [7.0, np.nan], [np.nan, np.nan]]), np.array([[np.nan, np.nan]])])
    # Before any observation: the training mean; after: the last observation of that sequence.
    np.testing.assert_array_equal(first, [[2.0, 5.0, 0, 1], [7.0, 5.0, 1, 0], [7.0, 5.0, 0, 0]])
    np.testing.assert_array_equal(second, [[2.0, 15.0, 0, 0]])  # nothing leaks across sequences


def test_encoder_without_missing_values_passes_data_through():
    encoder = InputEncoder.fit([np.ones((2, 3))])
    assert not encoder.use_mask and encoder.n_inputs == 3
    flat = encoder.encode([np.arange(6.0).reshape(2, 3)])
    assert not torch.isnan(flat.values).any()
    assert flat.values.dtype == torch.float32


def test_encoder_refuses_what_fit_refuses_and_fits_small_dtypes_in_float64():
    # enc44: float16 sums overflowed (fill value inf for a channel at 1000); encode let an
    # infinite value through (a scaled sequence wiped to 0, a false "missing values"
    # warning); text and complex arrays met raw ufunc errors; a column name met "X came
    # without column names" though the sequences were frames; time_feature=0.5 read as 0.
    x = np.full((200, 1), 1000, dtype=np.float16)
    x[5] = np.nan
    assert InputEncoder.fit([x]).fill_values.tolist() == [1000.0]
    train = [np.array([[1.0], [2.0], [3.0]]), np.array([[2.0], [5.0]])]
    for encoder in (InputEncoder.fit(train, scaled=[0]), InputEncoder.fit(train)):
        with pytest.raises(ValueError, match=r"InputEncoder.encode_arrays: sequence 0, step 1, feature 0 is "
                                             r"infinite: expected finite values"):
            encoder.encode_arrays([np.array([[1.0], [np.inf], [3.0]])])
        with pytest.raises(ValueError, match=r"InputEncoder.encode: sequence 1, step 0, feature 0 is infinite"):
            encoder.encode([np.ones((2, 1)), np.array([[-np.inf]])])
    for bad, dtype in ((np.array([[1.0 + 2j]]), "complex128"), (np.array([[None]]), "object"),
                       (np.array([["a"]]), "<U1")):
        with pytest.raises(ValueError, match=rf"InputEncoder.fit expects arrays of numbers \(bool, int or float\); "
                                             rf"sequence 0 holds values of dtype {dtype}"):
            InputEncoder.fit([bad])
        with pytest.raises(ValueError, match=r"InputEncoder.encode_arrays expects arrays of numbers"):
            InputEncoder.fit(train).encode_arrays([bad])
    with pytest.raises(TypeError, match=r"InputEncoder.fit takes the time column's index .* got the name 'day'. "
                                        r"It reads arrays, which carry no column names"):
        InputEncoder.fit([np.ones((2, 2))], time_feature="day")
    with pytest.raises(TypeError, match=r"got 0.5 of type float"):
        InputEncoder.fit([np.ones((2, 2))], time_feature=0.5)
    with pytest.raises(TypeError, match=r"got 0.5 of type float"):
        InputEncoder.nearly_flat_channels([np.ones((2, 2))], time_feature=0.5)


def test_a_hand_built_encoder_refuses_fields_the_model_file_loader_refuses():
    # enc44: NaN fill values reached the network, a spread of 0 gave levels of -1.8e308,
    # scaled channels without a scale_floor or of another width met numpy broadcast errors.
    x = [np.array([[np.nan], [1.0], [3.0]])]
    stats = np.array([[0.0], [1.0]])
    base = dict(n_features=1, fill_values=np.zeros(1), use_mask=True)
    with pytest.raises(ValueError, match=r"fill_values must be finite .* got \[nan\]"):
        InputEncoder(**{**base, "fill_values": np.array([np.nan])})
    with pytest.raises(ValueError, match=r"level_stats must hold finite centers and positive, finite spreads"):
        InputEncoder(**base, scaled=[0], scale_floor=[1e-8], level_stats=np.array([[5.0], [0.0]]),
                     log_scale_stats=stats)
    with pytest.raises(ValueError, match=r"scale_floor must hold one positive, finite spread per scaled channel "
                                         r"\(1\); got \[1.0, 1.0\]"):
        InputEncoder(**base, scaled=[0], scale_floor=[1.0, 1.0], level_stats=stats, log_scale_stats=stats)
    lacking = InputEncoder(**base, scaled=[0], level_stats=stats, log_scale_stats=stats)
    with pytest.raises(ValueError, match=r"reads channels \[0\] per sequence but lacks their scale_floor"):
        lacking.encode_arrays(x)
    whole = InputEncoder(**base, scaled=[0], scale_floor=[1e-8], level_stats=stats, log_scale_stats=stats)
    assert np.isfinite(whole.encode_arrays(x)[0]).all()


def test_time_messages_name_zero_padding_and_a_table_read_as_times():
    # enc44: zero padding after a sequence's end was told to "sort each sequence's steps
    # by time" (which moves the padding to the front as visits at time 0); a table with an
    # int time_feature read its values as time stamps (silently, when they increased).
    from sklearn_rnn import RNNRegressor

    X = np.zeros((3, 4, 2))
    X[0] = [[0, 1], [2, 1.5], [5, 2], [9, 2.5]]
    X[1, :2] = [[0, 3], [4, 3.5]]
    X[2, :3] = [[1, 0.5], [3, 0.7], [8, 0.2]]
    with pytest.raises(ValueError, match=r"sequence 1 of X has times that decrease at step 2 \(0 after 4\) .* "
                                         r"its steps from 2 on are all zeros: zero padding.* Pad with NaN"):
        RNNRegressor(hidden_size=2, max_iter=1, time_feature=0).fit(X, [1.0, 2.0, 3.0])
    table = np.cumsum(np.random.default_rng(0).uniform(0, 1, (6, 5)), axis=1)
    with pytest.raises(ValueError, match=r"time_feature=0 asks for a time column, but X is a 2D table.*"
                                         r"X\[:, :, None\]"):
        RNNRegressor(hidden_size=2, max_iter=1, time_feature=0).fit(table, np.arange(6.0))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        events = RNNRegressor(hidden_size=2, max_iter=1, time_feature=0).fit(table[:, :, None], np.arange(6.0))
    assert events._encoder.n_values == 0  # event times alone, asked for as a 3D array


def test_encoding_warnings_point_at_the_callers_line_and_name_float32_underflow():
    # enc44: the no-time-scale warning pointed at _estimators.py; a feature of about 1e-50
    # trained as all zeros in float32 without a word.
    from sklearn_rnn import RNNRegressor

    X = [np.array([[0.0, 1.0]]), np.array([[5.0, 2.0]]), np.array([[3.0, 2.0], [3.0, 4.0]])]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        RNNRegressor(hidden_size=2, max_iter=1, random_state=0, time_feature=0).fit(X, [1.0, 2.0, 3.0])
    scale = [w for w in caught if "no positive gap" in str(w.message)]
    assert len(scale) == 1 and scale[0].filename == __file__
    rng = np.random.default_rng(0)
    tiny = [np.column_stack([rng.normal(size=4), 1e-50 * rng.normal(size=4)]) for _ in range(6)]
    with pytest.warns(UserWarning, match=r"feature 1 of the training data holds nonzero values below float32's "
                                         r"smallest normal number \(1.18e-38; the smallest here .*e-5\d\)"):
        InputEncoder.fit(tiny)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        InputEncoder.fit(tiny, scaled=[1])  # read per sequence: standardized in float64
        InputEncoder.fit([1e30 * x for x in tiny])


# ------------------------------------------------------------------- scaling
def test_scaler_uses_every_valid_step_and_keeps_the_form():
    X = [np.array([[0.0, 1.0], [2.0, np.nan]]), np.array([[4.0, 3.0]])]
    scaler = SequenceStandardScaler().fit(X)
    np.testing.assert_allclose(scaler.mean_, [2.0, 2.0])
    np.testing.assert_allclose(scaler.scale_, [np.sqrt(8 / 3), 1.0])
    out = scaler.transform(X)
    assert isinstance(out, list) and np.isnan(out[0][1, 1])
    np.testing.assert_allclose(np.concatenate(scaler.inverse_transform(out)), np.concatenate(X), atol=1e-12)
    padded = scaler.transform(restore_layout(X, "padded"))
    assert padded.shape == (2, 2, 2) and np.isnan(padded[1, 1]).all()


def test_per_sequence_scaling_uses_each_sequence_own_statistics():
    # Two series of one shape at amplitudes 1e-3 and 1e3: one shape after scaling.
    shape = np.array([[0.0, 5.0], [1.0, 5.0], [3.0, 5.0], [np.nan, np.nan]])
    X = [1e-3 * shape, 1e3 * shape + 7.0]
    scaler = SequenceStandardScaler(per_sequence=True).fit(X)
    small, large = scaler.transform(X)
    observed = shape[:3, 0]
    expected = (observed - observed.mean()) / observed.std()
    np.testing.assert_allclose(small[:3, 0], expected)
    np.testing.assert_allclose(large[:3, 0], expected)
    # A constant feature is only centered, trailing all-NaN steps are padding, and the
    # result does not depend on the other sequences or on the fitted statistics.
    np.testing.assert_array_equal(small[:, 1], [0.0, 0.0, 0.0])
    assert small.shape == (3, 2)
    np.testing.assert_allclose(scaler.transform([X[1]])[0], large)
    # A missing value stays missing and does not count in the statistics.
    one = SequenceStandardScaler(per_sequence=True).fit([np.ones((2, 1))])
    gap = one.transform([np.array([[1.0], [np.nan], [3.0]])])[0]
    np.testing.assert_array_equal(gap.ravel(), [-1.0, np.nan, 1.0])
    # with_std=False centers only; the shared scaling differs from this one.
    centered = SequenceStandardScaler(per_sequence=True, with_std=False).fit(X).transform(X)
    np.testing.assert_allclose(centered[1][:3, 0], 1e3 * (observed - observed.mean()))
    shared = SequenceStandardScaler().fit(X).transform(X)
    assert not np.allclose(shared[0][:3, 0], expected)
    with pytest.raises(ValueError, match="per_sequence=True.*cannot be undone"):
        scaler.inverse_transform(X)


@pytest.mark.parametrize("value", [0.1, 3.3, -7e5, 1e-30])
def test_scaler_leaves_a_constant_feature_unscaled_whatever_its_rounding(value):
    # 0.1 repeated 12 times has a computed standard deviation of 1.4e-17, not 0: it was
    # divided by that (training values -1, a test value of 0.2 became 7.2e15).
    X = [np.full((7, 1), value), np.full((5, 1), value)]
    scaler = SequenceStandardScaler().fit(X)
    assert scaler.scale_[0] == 1.0
    np.testing.assert_allclose(np.concatenate(scaler.transform(X)), 0.0, atol=1e-12 * abs(value))
    np.testing.assert_allclose(scaler.transform([np.array([[2 * value]])])[0], [[value]])
    # per_sequence: two patients with the same flat value are both only centred (they
    # became +1 and -1).
    own = SequenceStandardScaler(per_sequence=True).fit_transform(X)
    np.testing.assert_allclose(np.concatenate(own), 0.0, atol=1e-12 * abs(value))
    # A real spread far below the values' size is still one.
    tiny = [np.array([[1.0], [1.0 + 1e-9]])]
    assert SequenceStandardScaler().fit(tiny).scale_[0] == pytest.approx(5e-10, rel=1e-6)


def test_scaler_rejects_other_feature_counts():
    scaler = SequenceStandardScaler().fit([np.ones((2, 2))])
    with pytest.raises(ValueError, match="X has 3 features per step, but SequenceStandardScaler is expecting 2 features per step"):
        scaler.transform([np.ones((2, 3))])


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_check_float32_range_names_the_first_non_finite_step(bad):
    from sklearn_rnn.sequences import check_float32_range

    values = torch.ones(7, 3)
    values[5, 2] = bad  # sequence 2 (lengths 2, 3, 2), step 0
    with pytest.raises(ValueError, match="sequence 2 of X, step 0, holds a value beyond float32's range"):
        check_float32_range(values, torch.tensor([2, 3, 2]))
    check_float32_range(torch.ones(7, 3), torch.tensor([2, 3, 2]))
    check_float32_range(torch.ones(0, 3), torch.tensor([], dtype=torch.long))


def test_the_scaler_keeps_the_input_form_under_a_pandas_output_setting():
    # sklearn.set_config(transform_output="pandas"), a common global setting, made
    # scikit-learn wrap the scaler's list of sequences into a DataFrame, which failed
    # with numpy's "inhomogeneous shape" error; Pipeline.set_output likewise.
    import sklearn
    from sklearn.pipeline import make_pipeline

    from sklearn_rnn import RNNClassifier

    rng = np.random.default_rng(0)
    X = [rng.normal(size=(int(rng.integers(3, 9)), 3)) for _ in range(30)]
    y = np.arange(30) % 2
    expected = SequenceStandardScaler().fit_transform(X)
    for setting in ("pandas", "polars"):
        with sklearn.config_context(transform_output=setting):
            scaled = SequenceStandardScaler().fit_transform(X)
        assert isinstance(scaled, list)
        for got, want in zip(scaled, expected):
            np.testing.assert_array_equal(got, want)
    pipeline = make_pipeline(SequenceStandardScaler(), RNNClassifier(max_iter=2, random_state=0))
    reference = pipeline.fit(X, y).predict_proba(X)
    with sklearn.config_context(transform_output="pandas"):
        np.testing.assert_array_equal(pipeline.set_output(transform="pandas").fit(X, y).predict_proba(X), reference)
    with pytest.raises(ValueError, match="transform='table': expected 'default', 'pandas', 'polars' or None"):
        SequenceStandardScaler().set_output(transform="table")


def test_a_scaler_pickled_before_the_shared_validation_still_transforms():
    # Fitted scalers of earlier versions hold n_features_in_ (the features per step)
    # but not the form of fit that the shared validation records.
    import pickle

    X = [np.array([[0.0, 1.0], [2.0, 3.0]]), np.array([[4.0, 5.0]])]
    scaler = SequenceStandardScaler().fit(X)
    del scaler._fitted_layout, scaler._n_step_features
    old = pickle.loads(pickle.dumps(scaler))
    for got, want in zip(old.transform(X), SequenceStandardScaler().fit(X).transform(X)):
        np.testing.assert_array_equal(got, want)
    with pytest.raises(ValueError, match="X has 1 features per step, but SequenceStandardScaler is expecting 2"):
        old.transform([np.ones((3, 1))])


def test_meta_estimators_that_check_x_themselves_take_the_sequence_column():
    # BaggingClassifier validates X as an array before the estimator sees it and stops
    # on a ragged list; the sequence column goes through (the input-formats page says
    # so). CalibratedClassifierCV takes the list as it is.
    from sklearn.calibration import CalibratedClassifierCV
    from sklearn.ensemble import BaggingClassifier

    from sklearn_rnn import RNNClassifier
    from sklearn_rnn.sequences import sequence_column

    rng = np.random.default_rng(0)
    X = [rng.normal(size=(int(rng.integers(3, 9)), 2)) for _ in range(40)]
    y = np.array([int(x[0, 0] > 0) for x in X])
    member = RNNClassifier(hidden_size=6, max_iter=3, random_state=0)
    with pytest.raises(ValueError, match="inhomogeneous"):
        BaggingClassifier(member, n_estimators=2, random_state=0).fit(X, y)
    bagged = BaggingClassifier(member, n_estimators=2, random_state=0).fit(sequence_column(X), y)
    assert bagged.predict_proba(sequence_column(X)).shape == (40, 2)
    calibrated = CalibratedClassifierCV(member, cv=2).fit(X, y)
    np.testing.assert_allclose(calibrated.predict_proba(X).sum(axis=1), 1.0)


@pytest.mark.parametrize("per_sequence", [False, True])
def test_the_scaler_leaves_a_named_time_column_as_it_is(per_sequence):
    # With per_sequence=True the time column of each sequence was rescaled by its own
    # spread: visits a day apart and a year apart became the same steps.
    rng = np.random.default_rng(0)
    X = [np.c_[gap * np.arange(5.0), rng.normal(size=5)] for gap in (1.0, 365.0, 30.0)]
    frames = [pd.DataFrame(x, columns=["day", "bili"]) for x in X]
    plain = SequenceStandardScaler(per_sequence=per_sequence).fit(X)
    for data, time_feature in ((X, 0), (X, -2), (frames, "day")):
        scaler = SequenceStandardScaler(per_sequence=per_sequence, time_feature=time_feature)
        out = scaler.fit_transform(data)
        for original, scaled, reference in zip(X, out, plain.transform(X)):
            scaled = np.asarray(scaled)
            np.testing.assert_array_equal(scaled[:, 0], original[:, 0])
            np.testing.assert_allclose(scaled[:, 1], reference[:, 1])
        assert scaler.mean_[0] == 0.0 and scaler.scale_[0] == 1.0
    with pytest.raises(ValueError, match="time_feature='visit' is not a column of X"):
        SequenceStandardScaler(time_feature="visit").fit(frames)
    with pytest.raises(ValueError, match="time_feature=2 is out of range"):
        SequenceStandardScaler(time_feature=2).fit(X)


def test_a_scaler_pickled_before_time_feature_existed_keeps_working():
    # Its __dict__ has no time_feature: repr, get_params, clone and fit raised AttributeError.
    import pickle

    from sklearn.base import clone

    X = [np.random.default_rng(0).normal(size=(5, 2))]
    scaler = SequenceStandardScaler().fit(X)
    del scaler.__dict__["time_feature"], scaler.__dict__["_time_column"]
    old = pickle.loads(pickle.dumps(scaler))
    assert old.get_params()["time_feature"] is None and "SequenceStandardScaler()" == repr(old)
    np.testing.assert_array_equal(old.transform(X)[0], scaler.transform(X)[0])
    clone(old).fit(X)
    old.fit(X)


def test_prediction_encodes_a_bounded_number_of_values_at_a_time(monkeypatch):
    import sklearn_rnn._estimators as estimators

    rng = np.random.default_rng(1)
    X = [rng.normal(size=(int(rng.integers(3, 30)), 2)) for _ in range(60)] + [rng.normal(size=(200, 2))]
    y = np.arange(61) % 2
    clf = RNNClassifier(hidden_size=4, max_iter=1, random_state=0).fit(X, y)
    whole = clf.predict_proba(X)
    encoded = []
    encode = type(clf._encoder).encode
    monkeypatch.setattr(type(clf._encoder), "encode",
                        lambda self, sequences, **kw: encoded.append(sum(s.size for s in sequences))
                        or encode(self, sequences, **kw))
    monkeypatch.setattr(estimators, "PREDICT_CHUNK_VALUES", 100)
    np.testing.assert_allclose(clf.predict_proba(X), whole, atol=1e-12)
    assert len(encoded) > 10 and sum(encoded) == sum(x.size for x in X)
    assert all(size <= 100 for size in encoded if size != 400)  # the 200-step sequence alone


def test_the_scaler_keeps_features_whose_squares_pass_float64s_range():
    # Values near 1e200: the squared deviations overflowed, scale_ became inf and every
    # value 0, with only numpy's RuntimeWarning.
    X = [np.array([[1e200, 1.0], [3e200, 2.0]]), np.array([[2e200, 3.0]])]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        scaler = SequenceStandardScaler().fit(X)
    np.testing.assert_allclose(scaler.scale_, [np.sqrt(2 / 3) * 1e200, np.sqrt(2 / 3)])
    np.testing.assert_allclose(np.concatenate(scaler.transform(X))[:, 0], [-np.sqrt(1.5), np.sqrt(1.5), 0.0], atol=1e-12)
    ordinary = [x / 1e200 for x in X]  # ordinary values: the same arithmetic as before
    np.testing.assert_allclose(SequenceStandardScaler().fit(ordinary).scale_[0], np.sqrt(2 / 3), rtol=1e-15)


def test_the_scaler_keeps_features_whose_sum_passes_float64s_range():
    # Values near 1e307: the sum over the steps overflowed, mean_ became inf and every
    # value -inf, with only numpy's RuntimeWarning (the squares were handled, not the sum).
    X = [np.array([[1e307, 1.0], [3e307, 2.0]])] * 10
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        scaler = SequenceStandardScaler().fit(X)
        np.testing.assert_allclose(scaler.mean_, [2e307, 1.5])
        np.testing.assert_allclose(scaler.scale_, [1e307, 0.5])
        np.testing.assert_allclose(scaler.transform(X)[0], [[-1.0, -1.0], [1.0, 1.0]], atol=1e-12)
        large = [np.array([[1e308], [1.5e308]])]
        own = SequenceStandardScaler(per_sequence=True).fit(large).transform(large)[0]
        np.testing.assert_allclose(own.ravel(), [-1.0, 1.0], atol=1e-12)
    ordinary = [np.random.default_rng(i).normal(size=(7, 2)) for i in range(10)]  # the same arithmetic as before
    np.testing.assert_array_equal(SequenceStandardScaler().fit(ordinary).mean_, np.concatenate(ordinary).mean(axis=0))


def test_the_scaler_keeps_features_whose_deviations_pass_float64s_range():
    # 1.7e308 on both sides of the mean: the deviations overflowed (not only their
    # squares), scale_ became inf and the transform turned a finite value into NaN.
    X = [np.array([[1.7e308], [-1.7e308], [1.7e308]])]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        scaler = SequenceStandardScaler().fit(X)
        np.testing.assert_allclose(scaler.scale_, [np.sqrt(8 / 9) * 1.7e308])
        scaled = scaler.transform(X)
        np.testing.assert_allclose(scaled[0].ravel(), [np.sqrt(0.5), -np.sqrt(2), np.sqrt(0.5)])
        np.testing.assert_allclose(scaler.inverse_transform(scaled)[0], X[0])  # back, no overflow
        own = SequenceStandardScaler(per_sequence=True).fit(X).transform(X)[0]
        np.testing.assert_allclose(own.ravel(), [np.sqrt(0.5), -np.sqrt(2), np.sqrt(0.5)])


def test_the_scaler_keeps_the_width_of_a_table_given_as_a_list_of_rows():
    # Rows whose last step is NaN in every row: a list of rows came back narrower than it
    # went in (an array kept its width), so a pipeline's network was fitted on 3 of 4
    # features and the scaler's own inverse_transform refused its output.
    from sklearn.pipeline import make_pipeline

    nan = float("nan")
    rows = [[1.0, 2.0, 3.0, nan], [3.0, 4.0, nan, nan], [0.5, 1.0, 2.0, nan], [2.0, 1.0, nan, nan]]
    scaler = SequenceStandardScaler().fit(rows)
    out = scaler.transform(rows)
    assert np.shape(out) == (4, 4) == np.shape(scaler.transform(np.array(rows)))
    np.testing.assert_allclose(scaler.inverse_transform(out), np.array(rows))
    series = [pd.Series(row) for row in rows]
    assert np.shape(SequenceStandardScaler().fit(series).transform(series)) == (4, 4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pipeline = make_pipeline(SequenceStandardScaler(), RNNClassifier(hidden_size=3, max_iter=1, random_state=0))
        pipeline.fit(rows, [0, 1, 0, 1])
    assert pipeline[-1].n_features_in_ == 4
    assert pipeline.predict([[1.0, 2.0, 3.0, 4.0], [3.0, 4.0, nan, nan]]).shape == (2,)


def test_the_encoding_statistics_include_the_held_out_sequences_and_the_docs_say_so():
    # The fill values ("the training mean") were fitted on all of fit's X, the sequences
    # early_stopping holds out included, while the docs spoke only of training data.
    from sklearn_rnn import RNNRegressor, RNNStepClassifier

    rng = np.random.default_rng(0)
    X = [rng.normal(size=(3, 1)) for _ in range(40)]
    for x in X:
        x[0] = np.nan
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = RNNClassifier(hidden_size=2, max_iter=1, random_state=0, early_stopping=True).fit(X, [0, 1] * 20)
    assert model.validation_scores_  # sequences were held out
    np.testing.assert_allclose(model._encoder.fill_values, [np.nanmean(np.concatenate(X))])
    for documented in (RNNClassifier, RNNRegressor, RNNStepClassifier, InputEncoder):
        text = " ".join(documented.__doc__.split())
        assert "held-out sequences included" in text or "holds out included" in text, documented.__name__


@pytest.mark.filterwarnings("ignore:The PyTorch API of nested tensors is in prototype stage")
@pytest.mark.parametrize("layout", ["strided", "jagged"])
def test_the_scaler_transforms_a_torch_nested_tensor_as_the_list_it_holds(layout):
    # fit and the estimators read a nested tensor as its list of sequences, but transform,
    # fit_transform and inverse_transform read its shape: "NestedTensorImpl doesn't support
    # sizes" (strided), "ge: relation is indeterminate" (jagged); so a Pipeline(scaler,
    # RNN) could not fit one.
    from sklearn.pipeline import make_pipeline

    from sklearn_rnn import RNNRegressor

    rng = np.random.default_rng(0)
    X = [rng.normal(size=(int(n), 2)) for n in rng.integers(2, 6, size=12)]
    nested = torch.nested.nested_tensor([torch.tensor(x) for x in X], layout=getattr(torch, layout))
    scaler = SequenceStandardScaler().fit(X)
    expected = scaler.transform(X)
    for out in (scaler.transform(nested), SequenceStandardScaler().fit_transform(nested)):
        assert isinstance(out, list)
        for got, want in zip(out, expected, strict=True):
            np.testing.assert_allclose(got, want, atol=1e-12)
    back = scaler.inverse_transform(torch.nested.nested_tensor([torch.tensor(z) for z in expected], layout=getattr(torch, layout)))
    for got, want in zip(back, X, strict=True):
        np.testing.assert_allclose(got, want, atol=1e-12)
    y = rng.normal(size=12)
    params = dict(hidden_size=4, max_iter=1, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pipeline = make_pipeline(SequenceStandardScaler(), RNNRegressor(**params)).fit(nested, y)
        np.testing.assert_allclose(pipeline.predict(nested), make_pipeline(SequenceStandardScaler(), RNNRegressor(**params)).fit(X, y).predict(X))


@pytest.mark.parametrize("call", [
    lambda size: bucket_batches(np.array([3, 1, 2]), size),
    lambda size: bucket_batches(np.array([3, 1, 2]), size, shuffle=True, rng=np.random.default_rng(0)),
    lambda size: balanced_batches(np.array([3, 1, 2]), np.array([0, 1, 0]), size, rng=np.random.default_rng(0)),
    lambda size: BucketBatchLoader(SequenceDataset(FlatSequences.from_arrays([np.ones((2, 1))])), size),
])
@pytest.mark.parametrize("size", [0, -1, 2.5, True])
def test_batch_sizes_that_are_not_positive_ints_are_refused_by_name(call, size):
    # 0 failed inside range() or with a ZeroDivisionError, -1 gave no batches at all
    # (every sequence silently dropped), 2.5 a TypeError about floats.
    with pytest.raises(ValueError, match=rf"batch_size must be an int of at least 1 .*got {size!r} of type"):
        call(size)


def test_bounded_batches_refuse_a_padding_bound_below_one():
    with pytest.raises(ValueError, match="max_padding must be a number of at least 1.*got 0"):
        bucket_batches(np.array([3, 1]), 2, max_padding=0)
    assert len(bucket_batches(np.array([3, 1]), 2, max_padding=1)) == 2  # 1: no padding at all


@pytest.mark.parametrize("tool", [
    lambda arrays: FlatSequences.from_arrays(arrays),
    lambda arrays: InputEncoder.fit(arrays),
    lambda arrays: InputEncoder.nearly_flat_channels(arrays),
    lambda arrays: InputEncoder.fit([np.ones((2, 2))]).encode(arrays),
    lambda arrays: InputEncoder.fit([np.ones((2, 2))]).encode_arrays(arrays),
])
@pytest.mark.parametrize(("arrays", "message"), [
    ([], "needs at least one sequence; got none"),
    ([np.ones(3)], r"expects a list of \(n_steps, n_features\) arrays; sequence 0 has shape \(3,\).*np.reshape"),
    ([np.ones((2, 2)), np.ones((3, 2, 1))], r"sequence 1 has shape \(3, 2, 1\)"),
    ([np.ones((2, 2)), np.ones((0, 2))], r"at least one step; sequence 1 has none"),
    ([np.ones((2, 2)), np.ones((1, 3))], "sequence 1 has 3 features per step"),
])
def test_the_low_level_sequence_tools_refuse_what_is_not_a_list_of_step_arrays(tool, arrays, message):
    # Before: IndexError, numpy's concatenation message, or (an empty sequence) a
    # batch whose last step is read at index -1.
    with pytest.raises(ValueError, match=message):
        tool(arrays)


def test_an_encoder_refuses_sequences_of_another_width_than_it_was_fitted_on():
    encoder = InputEncoder.fit([np.ones((3, 2)), np.zeros((2, 2))])
    assert encoder.encode_arrays([np.ones((1, 2))])[0].shape == (1, 2)
    for encode in (encoder.encode, encoder.encode_arrays):
        # Before: three columns passed as values of a two-feature encoding.
        with pytest.raises(ValueError, match="sequence 0 has 3 features per step, but the encoder was fitted on 2"):
            encode([np.ones((3, 3))])


@pytest.mark.parametrize(("values", "lengths", "message"), [
    (torch.ones(5), torch.tensor([5]), r"values must be a \(total_steps, n_features\) tensor.*got \(5,\)"),
    (torch.ones(5, 1), torch.tensor([3, 1, 2]), "sum to at most the 5 rows of values; got lengths from 1 to 3 summing to 6"),
    (torch.ones(5, 1), torch.tensor([3, 0, 2]), "at least 1 each.*from 0 to 3"),
    (torch.ones(5, 1), torch.tensor([2.5, 2.5]), "lengths must be a 1-D tensor of integers.*torch.float32"),
    (torch.ones(5, 1), [3, 2], "lengths must be a 1-D tensor of integers.*got list"),
])
def test_flat_sequences_refuse_lengths_their_values_cannot_hold(values, lengths, message):
    # Before: an IndexError at the first batch (lengths past the rows), an empty step
    # axis (a length of 0), or float lengths silently truncated.
    with pytest.raises(ValueError, match=message):
        FlatSequences(values, lengths)
    assert FlatSequences(torch.ones(5, 1), torch.tensor([3, 1])).common_length is None  # spare rows stay allowed


def test_a_dataset_refuses_targets_and_weights_of_another_count_than_its_sequences():
    flat = FlatSequences.from_arrays([np.ones((n, 1)) for n in (3, 1, 2)])
    # Before: an IndexError at the batch that reached the missing rows.
    with pytest.raises(ValueError, match="y must hold one target .* per sequence, 3 for these 3 sequences; got 2"):
        SequenceDataset(flat, torch.tensor([0, 1]))
    with pytest.raises(ValueError, match="sample_weight must hold one weight per sequence, 3 .*; got 2"):
        SequenceDataset(flat, torch.tensor([0, 1, 1]), torch.ones(2))
    with pytest.raises(ValueError, match=r"sample_weight must be a tensor of shape \(3,\)"):
        SequenceDataset(flat, torch.tensor([0, 1, 1]), torch.ones(3, 1))
    # Before: numpy targets indexed with a tensor, a scalar for a one-sequence batch.
    with pytest.raises(ValueError, match=r"y must be a torch.Tensor .*got ndarray. Pass torch.as_tensor\(y\)"):
        SequenceDataset(flat, np.array([0, 1, 1]))


def test_per_step_targets_must_follow_the_steps_of_their_inputs():
    inputs = FlatSequences.from_arrays([np.ones((3, 1)), np.ones((2, 1))])
    # Before: accepted, and a batch of x with 3 steps came with y of 2.
    with pytest.raises(ValueError, match="sequence 0 has 3 steps and its targets 2"):
        SequenceDataset(inputs, FlatSequences.from_arrays([np.ones((2, 1)), np.ones((2, 1))]))
    data = SequenceDataset(inputs, FlatSequences.from_arrays([np.zeros((3, 4)), np.zeros((2, 4))]))
    assert data.collate(np.array([0, 1]))[1].shape == (2, 3, 4)


def test_shapes_the_batching_functions_cannot_read_are_refused():
    # Before: 2-D lengths were argsorted row by row into 2-D "batches".
    with pytest.raises(ValueError, match=r"lengths must be one-dimensional.*got shape \(2, 2\)"):
        bucket_batches(np.array([[3, 1], [2, 2]]), 1)
    with pytest.raises(ValueError, match=r"lengths and labels must be one-dimensional.*\(2,\) and \(1,\)"):
        balanced_batches(np.array([3, 1]), np.array([0]), 2, rng=np.random.default_rng(0))
    # Before: torch's max() of an empty tensor failed; an empty batch has no steps.
    x, lengths = FlatSequences.from_arrays([np.ones((3, 2)), np.ones((1, 2))]).batch(np.array([], dtype=int))
    assert x.shape == (0, 0, 2) and lengths.shape == (0,)


def test_the_low_level_tools_read_an_equal_length_3d_array_as_its_sequences():
    # An (n, T, d) array iterates as n (T, d) sequences, which the tools always took;
    # one (T, d) array is refused with the list to pass.
    block = np.arange(24.0).reshape(4, 3, 2)
    encoder = InputEncoder.fit(block)
    np.testing.assert_array_equal(np.stack(encoder.encode_arrays(block)), block)
    assert FlatSequences.from_arrays(block).common_length == 3
    with pytest.raises(ValueError, match=r"got one array of shape \(3, 2\).*For one sequence, pass \[X\]"):
        InputEncoder.fit(block[0])


def test_a_dataframe_with_no_columns_is_refused_by_name():
    # A column selection that matched nothing: numpy's "at least one array or dtype is
    # required" from the scaler and the estimators, "X is a sparse matrix" from check_sequences.
    import pandas as pd

    from sklearn_rnn import RNNClassifier

    table = pd.DataFrame({"id": [1, 2, 3], "lab_x": [0.1, 0.2, 0.3]})
    labs = table[[c for c in table.columns if c.startswith("lab_y")]]
    for call in (SequenceStandardScaler().fit, check_sequences, lambda X: RNNClassifier().fit(X, [0, 1, 0])):
        with pytest.raises(ValueError, match=r"^X is a DataFrame with no columns \(shape \(3, 0\)\): expected at "
                                             r"least one column of values"):
            call(labs)


def test_a_boolean_mask_or_float_indices_are_refused_and_no_indices_select_nothing():
    # A mask was read as the positions 0 and 1 (and SequenceDataset.subset masked the
    # targets but not the inputs: pairs mixed up); floats were truncated; [] an IndexError.
    import torch

    from sklearn_rnn.sequences import FlatSequences, SequenceDataset

    flat = FlatSequences.from_arrays([np.ones((2, 1)), 2 * np.ones((1, 1)), 3 * np.ones((3, 1))])
    data = SequenceDataset(flat, torch.tensor([10.0, 20.0, 30.0]))
    for call in (lambda: flat.batch(np.array([True, False, True])), lambda: flat.subset(np.array([True, False, True])),
                 lambda: data.subset(np.array([True, True, True]))):
        with pytest.raises(ValueError, match=r"^indices must be integer positions of sequences; got dtype torch\.bool\. "
                                             r"For a boolean mask, pass np\.flatnonzero\(mask\)\.$"):
            call()
    with pytest.raises(ValueError, match=r"got dtype torch\.float64\.$"):
        flat.batch(np.array([0.9, 2.7]))
    assert len(data.subset([])) == 0 and len(data.subset(np.flatnonzero([True, False, True]))) == 2
    assert data.subset(np.flatnonzero([True, False, True])).y.tolist() == [10.0, 30.0]


def test_the_encoder_reads_float32_as_float64_and_encode_arrays_gives_copies():
    # float32 moments: a flat sequence encoded as -1 at every step, and a per-sequence
    # covariate was taken for a nearly flat channel; encode_arrays handed back views of X.
    from sklearn_rnn.sequences import InputEncoder

    rng = np.random.default_rng(0)
    X = [(rng.normal(size=(10, 1)) * a) for a in (0.1, 1, 10, 100)] + [np.full((7, 1), 1000.1)]
    encoded = {dtype: InputEncoder.fit([x.astype(dtype) for x in X], scaled=[0]).encode_arrays(
        [x.astype(dtype) for x in X])[-1][:, 0] for dtype in (np.float32, np.float64)}
    np.testing.assert_array_equal(encoded[np.float32], encoded[np.float64])
    assert (encoded[np.float32] == 0).all()
    covariate = [np.c_[a * rng.normal(size=20), np.full(20, c)]
                 for a, c in zip(10.0 ** rng.uniform(-4, 1, 40), rng.normal(100, 1, 40))]
    assert InputEncoder.nearly_flat_channels([x.astype(np.float32) for x in covariate]) == (0,)
    sequences = check_sequences([np.array([[1.0], [2.0]]), np.array([[3.0]])])
    out = InputEncoder.fit(sequences).encode_arrays(sequences)
    out[0] *= 100
    assert sequences[0].ravel().tolist() == [1.0, 2.0]


def test_the_batching_tools_refuse_float_labels_for_balance_and_arrays_for_datasets():
    # balanced=True on float targets made every distinct value a class: 13 batches of all
    # 100 sequences at batch_size=8. A list of arrays gave a bare AttributeError.
    import torch

    from sklearn_rnn.sequences import BucketBatchLoader, FlatSequences, SequenceDataset

    data = SequenceDataset(FlatSequences.from_arrays([np.ones((2, 1))] * 100), torch.linspace(0, 1, 100))
    loader = BucketBatchLoader(data, 8, balanced=True, random_state=np.random.default_rng(0))
    with pytest.raises(ValueError, match=r"one integer class label per sequence.*got y of shape \(100,\) and dtype "
                                         r"torch\.float32\. Use balanced=False for regression targets"):
        loader.batches()
    with pytest.raises(TypeError, match=r"^sequences must be a FlatSequences; got list\. Build it with "
                                        r"FlatSequences\.from_arrays"):
        SequenceDataset([np.ones((2, 1))])
    with pytest.raises(TypeError, match=r"^dataset must be a SequenceDataset; got list"):
        BucketBatchLoader([np.ones((2, 1))], 2)


def test_the_encoder_refuses_an_infinite_value_by_place():
    from sklearn_rnn.sequences import InputEncoder

    timed = [np.array([[0.0, 1.0], [1.0, 2.0], [np.inf, 3.0]]), np.array([[0.0, 1.0], [2.0, 2.0]])]
    with pytest.raises(ValueError, match=r"^InputEncoder\.fit: sequence 0, step 2, feature 0 is infinite"):
        InputEncoder.fit(timed, time_feature=0)  # a false "no positive gap" warning, time_scale 1
    with pytest.raises(ValueError, match=r"sequence 0, step 1, feature 0 is infinite"):
        InputEncoder.fit([np.array([[1.0], [-np.inf]]), np.array([[2.0]])], scaled=[0])  # read as missing


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"fill_values": np.zeros(3)}, r"fill_values must hold one value per value channel \(1"),
    ({"time_scale": 0.0}, r"time_scale must be a positive, finite number; got 0\.0"),
    ({"n_features": 2, "fill_values": np.zeros(1), "time_feature": 5}, r"time_feature must be None or an int in \[0, 1\]"),
    ({"scaled": [0], "level_stats": np.zeros((2, 2))}, r"level_stats must have shape \(2, 1\)"),
])
def test_an_encoder_built_by_hand_refuses_fields_that_disagree(kwargs, match):
    # Fill values of another length broadcast into extra channels; time_scale 0 gave NaN
    # and inf gaps; a time_feature out of range a raw IndexError.
    from sklearn_rnn.sequences import InputEncoder

    fields = {"n_features": 1, "fill_values": np.zeros(1), "use_mask": False, **kwargs}
    with pytest.raises(ValueError, match=match):
        InputEncoder(**fields)


def test_the_warning_of_missing_values_at_prediction_points_at_the_callers_line():
    # It pointed inside the package, so Python's default filter showed it once per
    # process: a later predict with NaN from another line said nothing (infer43).
    rng = np.random.default_rng(0)
    X = [rng.normal(size=(4, 2)) for _ in range(12)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model = RNNClassifier(hidden_size=3, max_iter=1, random_state=0).fit(X, np.arange(12) % 2)
    gap = X[0].copy()
    gap[1, 0] = np.nan
    for method in (model.predict, model.predict_proba):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            method([gap])
        [warning] = [w for w in caught if "training data had none" in str(w.message)]
        assert warning.filename == __file__


def test_a_flat_sequence_with_rounding_noise_encodes_as_the_flat_one():
    # numerics45 2: an all-zero sequence's log scale read as typical (0), the same
    # sequence carrying 1e-16 of rounding noise as log(floor), -4 to -8 standard units
    # outside the training range (a prediction moved from -1.5 to -4.7).
    from sklearn_rnn.sequences import InputEncoder

    rng = np.random.default_rng(0)
    X = [a * rng.normal(size=(10, 1)) for a in 10.0 ** rng.uniform(-4, 1, size=60)]
    encoder = InputEncoder.fit(X, scaled=[0])
    t = np.linspace(0, 1, 12)
    still = np.diff(3 * t, 2)[:, None]  # zeros up to rounding
    assert 0 < np.abs(still).max() < 1e-14
    flat, noisy = encoder.encode_arrays([np.zeros((10, 1)), still])
    np.testing.assert_allclose(noisy, flat, atol=1e-6)
    typical = encoder.encode_arrays([X[0]])[0]
    assert abs(typical[0, -1]) > 1e-3  # a sequence with a spread keeps its own log scale


def test_a_time_scale_of_rounding_noise_from_a_shifted_origin_is_warned_of():
    # numerics45 1: labs of one visit whose times differed by a unit in the last place of
    # days since 1970 kept that difference when shifted to days since the first visit,
    # below any bound relative to the shifted times: time_scale 3.6e-12, a month 7e12.
    from sklearn_rnn.sequences import InputEncoder

    rng = np.random.default_rng(0)
    absolute = []
    for _ in range(20):
        visits = 19000 + np.cumsum(rng.uniform(20, 40, size=6))
        absolute.append(np.array([[v + lab * np.spacing(v), rng.normal()] for v in visits for lab in range(3)]))
    shifted = [sequence - [sequence[0, 0], 0] for sequence in absolute]
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        assert InputEncoder.fit(absolute, time_feature=0).time_scale == pytest.approx(31.9, rel=0.01)
        hourly = [np.c_[np.arange(50) / 24.0, rng.normal(size=50)] for _ in range(3)]  # fine-grained, not noise
        InputEncoder.fit(hourly, time_feature=0)
    with pytest.warns(UserWarning, match=r"typical gap \(time_scale=3.6\de-12\) .* rounding noise.*np.round"):
        InputEncoder.fit(shifted, time_feature=0)


def test_instance_norm_keeps_shapes_at_extreme_amplitudes_and_the_encoder_s_inputs_are_checked():
    # enc45 1, 2, 4, 10; numerics45 5: amplitudes above 1e154 gave an infinite pooled
    # spread (a scale floor of inf: every sequence encoded as zeros, a model file its
    # loader refused), below 1e-162 flat sequences; a small real amplitude's log scale
    # read as typical after the rounding-noise fix (now bounded at the channel's unit);
    # a NaN-padded 3D array's padding read as missing steps; scaled=[1.9] truncated.
    from sklearn_rnn.sequences import InputEncoder, check_sequences

    rng = np.random.default_rng(0)
    for low, high in ((160, 165), (-170, -165)):  # five decades: above the scale floor
        X = [10.0 ** rng.uniform(low, high) * rng.normal(size=(8, 1)) for _ in range(20)]
        with warnings.catch_warnings():
            warnings.simplefilter("error", RuntimeWarning)
            encoder = InputEncoder.fit(X, scaled=[0])
        assert np.isfinite(encoder.scale_floor).all() and np.isfinite(encoder.level_stats).all()
        unit = [x / np.abs(x).max() for x in X]  # the shapes alone, at amplitudes of 1
        reference = InputEncoder.fit(unit, scaled=[0])
        for got, want in zip(encoder.encode_arrays(X), reference.encode_arrays(unit)):
            np.testing.assert_allclose(got[:, 0], want[:, 0], rtol=1e-9, atol=1e-9)
    X = [a * rng.normal(size=(20, 1)) for a in 10.0 ** rng.uniform(-10, 0, size=200)]
    encoder = InputEncoder.fit(X, scaled=[0])
    shape = rng.normal(size=(20, 1))
    channel = [encoder.encode_arrays([a * shape])[0][0, -1] for a in (1e-8, 3e-9, 1e-9, 1e-10)]
    assert channel == sorted(channel, reverse=True) and channel[-1] < -1  # monotone, clamped at the floor
    padded = np.array([[[1.0], [2.0], [3.0]], [[4.0], [np.nan], [np.nan]]])
    with pytest.raises(ValueError, match=r"some end in steps that are all NaN, .*check_sequences\(X\), which strips"):
        InputEncoder.fit(padded)
    assert not InputEncoder.fit(check_sequences(padded)).use_mask
    for bad in ([1.9], "0", [True], 0):
        with pytest.raises(ValueError, match="scaled must be a sequence of value-channel indices"):
            InputEncoder.fit([np.ones((3, 2))], scaled=bad)
