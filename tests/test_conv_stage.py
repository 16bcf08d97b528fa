"""The convolutional input stage: its features, the 'auto' choice, refusals, model files."""

import json

import numpy as np
import pytest
import torch
from safetensors import safe_open
from safetensors.torch import save_file

from _helpers import quiet_fit

from sklearn_rnn import RNNClassifier, RNNRegressor, RNNStepClassifier
from sklearn_rnn.nn import ConvStage, RecurrentNetwork

TINY = dict(hidden_size=6, max_iter=3, batch_size=8, random_state=0)


def ragged(n=40, seed=0, d=2, low=3, high=15):
    rng = np.random.default_rng(seed)
    return [rng.normal(size=(int(rng.integers(low, high)), d)) for _ in range(n)]




def test_stage_features_are_a_convolution_of_each_sequence_alone():
    stage = ConvStage(2, (3, 4), 5)
    stage.reset_parameters(torch.Generator().manual_seed(0))
    short = torch.randn(1, 6, 2)
    # In a batch padded to 11 steps with garbage after step 6, the first 6 steps'
    # features are those of the sequence alone, and match a hand-written convolution.
    padded = torch.cat([short, torch.full((1, 5, 2), 1e6)], dim=1)
    batch = torch.cat([padded, torch.randn(1, 11, 2)])
    together = stage(batch, torch.tensor([6, 11]))[0, :6]
    alone = stage(short, torch.tensor([6]))[0]
    torch.testing.assert_close(together, alone)
    assert together.shape == (6, 10)
    width3 = stage.convolutions[0]
    zero_padded = torch.nn.functional.pad(short[0].T, (1, 1))  # (2, 8)
    by_hand = torch.stack([
        (width3.weight * zero_padded[:, t:t + 3]).sum((1, 2)) + width3.bias for t in range(6)
    ]).relu()
    torch.testing.assert_close(alone[:, :5], by_hand)
    assert (alone >= 0).all()  # ReLU features


def test_stage_draws_from_its_generator_only():
    first, second = ConvStage(3, (3, 9), 4), ConvStage(3, (3, 9), 4)
    torch.manual_seed(123)
    first.reset_parameters(torch.Generator().manual_seed(7))
    torch.manual_seed(456)
    second.reset_parameters(torch.Generator().manual_seed(7))
    for a, b in zip(first.parameters(), second.parameters()):
        torch.testing.assert_close(a, b)
    bound = 1 / np.sqrt(3 * 9)
    assert float(first.convolutions[1].weight.detach().abs().max()) <= bound


@pytest.mark.parametrize("kernels, channels", [((), 4), ((0,), 4), ((3,), 0)])
def test_stage_refuses_an_empty_or_zero_size(kernels, channels):
    with pytest.raises(ValueError, match="at least one kernel width of at least 1"):
        ConvStage(2, kernels, channels)


@pytest.mark.parametrize("pool, pooled_lengths", [(1, [13, 7, 2]), (2, [7, 4, 1])])
def test_network_with_a_stage_predicts_each_sequence_as_if_alone(pool, pooled_lengths):
    net = RecurrentNetwork(2, 8, 3, cell="gru", readout="pool", conv_kernels=(3, 9), conv_pool=pool,
                           generator=torch.Generator().manual_seed(0)).eval()
    x = torch.randn(3, 13, 2)
    lengths = torch.tensor([13, 7, 2])
    together = net(x, lengths)
    for row, length in enumerate(lengths.tolist()):
        alone = net(x[row:row + 1, :length], lengths[row:row + 1])
        torch.testing.assert_close(together[row:row + 1], alone, rtol=1e-5, atol=1e-6)
    assert net.input_projection.in_features == 64
    # The recurrence reads the pooled steps: 7 of the longest sequence's 13 with pool=2.
    features, read_lengths, _ = net._inputs(x, lengths)
    assert features.shape == (3, max(pooled_lengths), 64) and read_lengths.tolist() == pooled_lengths


def test_pooling_without_a_stage_is_refused():
    with pytest.raises(ValueError, match="conv_pool=2 pools the features of a convolutional stage"):
        RecurrentNetwork(2, 8, 3, conv_pool=2)


def test_auto_uses_the_stage_for_untimed_sequences_only():
    X = ragged(low=16, high=26)  # median length at least 18 steps
    y = np.array([int(x[0, 0] > 0) for x in X])
    clf = quiet_fit(RNNClassifier(**TINY), X, y)
    assert clf.module_.conv.kernel_sizes == (3, 9) and clf.module_.conv.channels == 32
    assert clf.module_.input_projection.in_features == 64
    custom = quiet_fit(RNNRegressor(conv_kernels=[5], conv_channels=4, **TINY), X, y.astype(float))
    assert custom.module_.conv.kernel_sizes == (5,) and custom.module_.input_projection.in_features == 4
    assert quiet_fit(RNNClassifier(conv_kernels=None, **TINY), X, y).module_.conv is None
    assert quiet_fit(RNNClassifier(conv_kernels=(), **TINY), X, y).module_.conv is None
    # With time stamps, the thesis' simplex method, or a target at every step: none.
    timed = [np.column_stack([np.cumsum(np.ones(len(x))), x]) for x in X]
    assert quiet_fit(RNNClassifier(time_feature=0, **TINY), timed, y).module_.conv is None
    simplex = quiet_fit(RNNClassifier(cell="tanh", optimizer="simplex", **TINY), X, y)
    assert simplex.module_.conv is None
    steps = [(x[:, 0] > 0).astype(int) for x in X]
    assert quiet_fit(RNNStepClassifier(**TINY), X, steps).module_.conv is None


@pytest.mark.parametrize(
    "params, message",
    [
        (dict(conv_kernels=(3,), cell="tanh", optimizer="simplex"), "cannot be used with optimizer='simplex'"),
        (dict(conv_kernels=(3,), cell="decay", time_feature=0), "cannot be used with cell='decay'"),
        (dict(conv_kernels=(3, 0)), r"whole numbers of at least 1 \(such as \(3, 9\)\), 'auto' or None; got \(3, 0\)"),
        (dict(conv_kernels=(3, 2.5)), "whole numbers of at least 1"),
        (dict(conv_kernels=(True,)), "whole numbers of at least 1"),
    ],
)
def test_impossible_stages_are_refused_with_the_fix(params, message):
    X = [np.column_stack([np.arange(len(x), dtype=float), x]) for x in ragged()]
    y = np.arange(len(X)) % 2
    with pytest.raises(ValueError, match=message):
        RNNClassifier(**TINY, **params).fit(X, y)


def test_auto_uses_the_stage_from_a_median_of_twice_the_widest_kernel():
    rng = np.random.default_rng(0)
    for median, stage in ((17, None), (18, (3, 9))):
        X = [rng.normal(size=(length, 2)) for length in (4, median, median, 40)]
        X = X * 5
        y = np.arange(len(X)) % 2
        conv = quiet_fit(RNNClassifier(**TINY), X, y).module_.conv
        assert (conv and conv.kernel_sizes) == stage, median
    # Framing comes first: 400 steps framed by 4 read as 100 steps, 60 framed by 4 as 15.
    for length, frame, stage in ((400, 4, (3, 9)), (60, 4, None)):
        X = [rng.normal(size=(length, 1)) for _ in range(8)]
        clf = quiet_fit(RNNClassifier(frame=frame, **TINY), X, np.arange(8) % 2)
        assert (clf.module_.conv and clf.module_.conv.kernel_sizes) == stage, length
    # An explicit stage is kept on short sequences.
    short = ragged()
    explicit = quiet_fit(RNNClassifier(conv_kernels=(3, 9), **TINY), short, np.arange(40) % 2)
    assert explicit.module_.conv.kernel_sizes == (3, 9)


def test_a_stream_keeps_the_stage_its_first_batch_chose():
    long, short = ragged(low=16, high=26), ragged(seed=1)
    y = np.arange(40) % 2
    with_stage = RNNClassifier(**TINY).partial_fit(long, y, classes=[0, 1])
    without = RNNClassifier(**TINY).partial_fit(short, y, classes=[0, 1])
    with_stage.partial_fit(short, y)  # 'auto' is not chosen again from each batch
    without.partial_fit(long, y)
    assert with_stage.module_.conv.kernel_sizes == (3, 9) and without.module_.conv is None
    assert with_stage.n_iter_ == without.n_iter_ == 2
    # Continued training with fit (warm_start) keeps it too.
    warm = quiet_fit(RNNClassifier(warm_start=True, **TINY), long, y)
    assert quiet_fit(warm, short, y).module_.conv.kernel_sizes == (3, 9)


def test_continued_training_refuses_another_stage():
    X = ragged(low=16, high=26)
    y = np.array([int(x[0, 0] > 0) for x in X])
    clf = quiet_fit(RNNClassifier(warm_start=True, **TINY), X, y)
    before = [p.detach().clone() for p in clf.module_.parameters()]
    for change in (dict(conv_kernels=(5,)), dict(conv_channels=8), dict(conv_kernels=None),
                   dict(conv_pool=3)):
        clf.set_params(**change)
        with pytest.raises(ValueError, match="conv_"):
            clf.fit(X, y)
        clf.set_params(conv_kernels="auto", conv_channels=32, conv_pool="auto")
    for a, b in zip(before, clf.module_.parameters()):
        assert torch.equal(a, b)  # nothing changed
    quiet_fit(clf, X, y)  # the same stage continues


def test_model_file_keeps_the_stage_and_refuses_a_forged_one(tmp_path):
    from sklearn_rnn._persistence import _digest

    X = ragged()
    y = np.array([int(x[0, 0] > 0) for x in X])
    clf = quiet_fit(RNNClassifier(conv_kernels=(3, 4), conv_channels=3, **TINY), X, y)
    path = tmp_path / "clf.safetensors"
    clf.save(path)
    loaded = RNNClassifier.load(path)
    assert loaded.module_.conv.kernel_sizes == (3, 4)
    np.testing.assert_array_equal(loaded.predict_proba(X), clf.predict_proba(X))
    with safe_open(str(path), framework="pt") as handle:
        tensors = {key: handle.get_tensor(key) for key in handle.keys()}
        header = json.loads(handle.metadata()["sklearn_rnn"])
    assert header["state"]["conv_kernels"] == [3, 4]

    def forged(edit_header, edit_tensors, name):
        new_header = json.loads(json.dumps(header))
        new_tensors = dict(tensors)
        edit_header(new_header)
        edit_tensors(new_tensors)
        new_header["sha256"] = _digest(new_header, new_tensors)
        target = tmp_path / name
        save_file(new_tensors, str(target), metadata={"sklearn_rnn": json.dumps(new_header)})
        return target

    one_width = forged(lambda h: h["state"].update(conv_kernels=[3]), lambda t: None, "one.safetensors")
    with pytest.raises(ValueError, match="4 convolution tensors, but its state describes conv_kernels=\\[3\\]"):
        RNNClassifier.load(one_width)
    wider = forged(lambda h: h["state"].update(conv_kernels=[3, 5]), lambda t: None, "wider.safetensors")
    with pytest.raises(ValueError, match="conv.convolutions.1.weight of shape \\(3, 2, 4\\)"):
        RNNClassifier.load(wider)
    channels = forged(lambda h: h["params"].update(conv_channels=4), lambda t: None, "ch.safetensors")
    with pytest.raises(ValueError, match="the file is inconsistent"):
        RNNClassifier.load(channels)
    bad = forged(lambda h: h["state"].update(conv_kernels=[3, 0]), lambda t: None, "bad.safetensors")
    with pytest.raises(ValueError, match="conv_kernels"):
        RNNClassifier.load(bad)


def test_pooled_stage_is_the_maximum_over_windows_of_each_sequence_alone():
    stage = ConvStage(2, (3, 4), 5, pool=3)
    unpooled = ConvStage(2, (3, 4), 5)
    for generator_seed, module in ((0, stage), (0, unpooled)):
        module.reset_parameters(torch.Generator().manual_seed(generator_seed))
    short = torch.randn(1, 7, 2)
    padded = torch.cat([short, torch.full((1, 5, 2), 1e6)], dim=1)  # garbage after step 7
    batch = torch.cat([padded, torch.randn(1, 12, 2)])
    lengths = torch.tensor([7, 12])
    together = stage(batch, lengths)
    assert together.shape == (2, 4, 10)
    assert stage.output_lengths(lengths).tolist() == [3, 4]
    alone = stage(short, torch.tensor([7]))[0]  # windows of steps 1-3, 4-6 and 7 alone
    torch.testing.assert_close(together[0, :3], alone)
    features = unpooled(short, torch.tensor([7]))[0]  # (7, 10)
    by_hand = torch.stack([features[0:3].amax(0), features[3:6].amax(0), features[6]])
    torch.testing.assert_close(alone, by_hand)
    assert "pool=3" in repr(stage)
    with pytest.raises(ValueError, match="pooling windows of at least 1 step; got .*pool=0"):
        ConvStage(2, (3,), 4, pool=0)


def test_auto_pools_the_stage_from_a_median_of_64_steps():
    rng = np.random.default_rng(0)
    for median, pool in ((63, 1), (64, 2)):
        X = [rng.normal(size=(length, 1)) for length in (20, median, median, 90)] * 3
        y = np.arange(len(X)) % 2
        clf = quiet_fit(RNNClassifier(**TINY), X, y)
        assert clf.module_.conv.pool == pool, median
    explicit = quiet_fit(RNNClassifier(conv_pool=3, **TINY), ragged(low=16, high=26), np.arange(40) % 2)
    assert explicit.module_.conv.pool == 3
    unpooled = quiet_fit(RNNClassifier(conv_pool=1, **TINY), X, y)
    assert unpooled.module_.conv.pool == 1
    # No stage: nothing to pool, and asking for it is refused with the fix.
    assert quiet_fit(RNNClassifier(conv_kernels=None, conv_pool=1, **TINY), X, y).module_.conv is None
    with pytest.raises(ValueError, match=r"conv_pool=2 pools .* this fit has none \(conv_kernels=None"):
        RNNClassifier(conv_kernels=None, conv_pool=2, **TINY).fit(X, y)
    with pytest.raises(ValueError, match="conv_pool"):
        RNNClassifier(conv_pool=0, **TINY).fit(X, y)
    # A stream keeps what its first batch chose.
    stream = RNNClassifier(**TINY).partial_fit(X, y, classes=[0, 1])
    stream.partial_fit(ragged(d=1, low=16, high=26), np.arange(40) % 2)
    assert stream.module_.conv.pool == 2


def test_model_file_keeps_the_pooling_and_refuses_a_forged_one(tmp_path):
    from sklearn_rnn._persistence import _digest

    X = ragged(low=16, high=26)
    y = np.array([int(x[0, 0] > 0) for x in X])
    clf = quiet_fit(RNNClassifier(conv_kernels=(3, 4), conv_channels=3, conv_pool=2, **TINY), X, y)
    path = tmp_path / "clf.safetensors"
    clf.save(path)
    loaded = RNNClassifier.load(path)
    assert loaded.module_.conv.pool == 2
    np.testing.assert_array_equal(loaded.predict_proba(X), clf.predict_proba(X))
    with safe_open(str(path), framework="pt") as handle:
        tensors = {key: handle.get_tensor(key) for key in handle.keys()}
        header = json.loads(handle.metadata()["sklearn_rnn"])
    assert header["state"]["conv_pool"] == 2

    def forged(edit, name):
        new_header = json.loads(json.dumps(header))
        edit(new_header)
        new_header["sha256"] = _digest(new_header, tensors)
        target = tmp_path / name
        save_file(tensors, str(target), metadata={"sklearn_rnn": json.dumps(new_header)})
        return target

    # A file written before the option has neither the field nor the parameter: its
    # stage is unpooled.
    older = RNNClassifier.load(forged(lambda h: (h["state"].pop("conv_pool"), h["params"].pop("conv_pool")),
                                      "old.safetensors"))
    assert older.module_.conv.pool == 1
    with pytest.raises(ValueError, match="conv_pool"):
        RNNClassifier.load(forged(lambda h: h["state"].update(conv_pool=0), "zero.safetensors"))
    no_stage = forged(lambda h: h["state"].update(conv_kernels=[]), "none.safetensors")
    with pytest.raises(ValueError, match="conv_pool=2"):
        RNNClassifier.load(no_stage)


@pytest.mark.parametrize("pool", [1, 2])
def test_large_batches_convolve_per_width_with_the_same_features(pool, monkeypatch):
    # Above WINDOW_LIMIT the stage does not copy every step's window (the widest kernel's
    # width times the input); its features are the same sums.
    import sklearn_rnn.nn._conv as conv

    stage = ConvStage(3, (3, 4, 9), 5, pool=pool).double()
    stage.reset_parameters(torch.Generator().manual_seed(0))
    x, lengths = torch.randn(4, 17, 3, dtype=torch.float64), torch.tensor([17, 9, 2, 1])
    windows = stage(x, lengths)
    calls = []
    monkeypatch.setattr(conv, "WINDOW_LIMIT", 0)
    monkeypatch.setattr(conv.F, "conv1d", lambda *a, **k: calls.append(1) or torch.conv1d(*a, **k))
    per_width = stage(x, lengths)
    assert len(calls) == 3
    torch.testing.assert_close(per_width, windows, rtol=0, atol=1e-12)
    per_width.sum().backward()  # trains too
    assert all(c.weight.grad is not None for c in stage.convolutions)


def test_the_network_takes_its_kernel_widths_as_any_sequence_as_the_stage_does():
    # ConvStage took np.array([3, 5]); the network tested the array's truth value and
    # raised numpy's "The truth value of an array with more than one element is ambiguous".
    widths = np.array([3, 5])
    assert ConvStage(2, widths, 4).kernel_sizes == (3, 5)
    x, lengths = torch.randn(3, 6, 2, generator=torch.Generator().manual_seed(1)), torch.tensor([6, 4, 1])
    outputs = []
    for kernels in (widths, [3, 5], (3, 5), np.arange(3, 6, 2)):
        net = RecurrentNetwork(2, 3, 1, conv_kernels=kernels, conv_channels=2, conv_pool=2,
                               generator=torch.Generator().manual_seed(0))
        assert net.conv.kernel_sizes == (3, 5) and all(type(size) is int for size in net.conv.kernel_sizes)
        outputs.append(net(x, lengths))
    for output in outputs[1:]:
        torch.testing.assert_close(output, outputs[0], rtol=0, atol=0)
    # The refusals read an array as they read a tuple.
    with pytest.raises(ValueError, match="conv_kernels is empty"):
        RecurrentNetwork(2, 3, 1, conv_kernels=np.array([], dtype=int), conv_pool=2)
    with pytest.raises(ValueError, match=r"use conv_kernels=\(\) with this cell"):
        RecurrentNetwork(2, 3, 1, cell="decay", gap_channel=0, conv_kernels=widths)


@pytest.mark.parametrize("kernels", [3, np.int64(3), np.array(3)])
def test_a_lone_width_is_refused_as_not_a_sequence_by_the_stage_and_the_network(kernels):
    # A bare int raised TypeError "'int' object is not iterable" from tuple(); the
    # estimators refuse it by their parameter constraints.
    with pytest.raises(ValueError, match=r"kernel_sizes must be a sequence of kernel widths.*\(3,\) for one"):
        ConvStage(2, kernels, 4)
    with pytest.raises(ValueError, match=r"conv_kernels must be a sequence of kernel widths.*\(3,\) for one"):
        RecurrentNetwork(2, 3, 1, conv_kernels=kernels)


def test_the_stage_names_what_is_wrong_with_its_input_and_takes_lengths_as_a_list():
    # A wrong width met "mat1 and mat2 shapes cannot be multiplied", a list of lengths
    # an AttributeError, float64 input a dtype error from inside the product.
    import torch

    from sklearn_rnn.nn import ConvStage

    stage = ConvStage(3, (3,), 4)
    stage.reset_parameters(torch.Generator().manual_seed(0))
    x = torch.randn(2, 5, 3)
    with pytest.raises(ValueError, match=r"shape \(batch, steps, 3\), the stage's input_size features; got \(2, 5, 2\)"):
        stage(x[..., :2], torch.tensor([5, 5]))
    with pytest.raises(ValueError, match=r"got \(5, 3\)"):
        stage(x[0], torch.tensor([5]))
    with pytest.raises(ValueError, match="x is torch.float64, but the stage's weights are torch.float32"):
        stage(x.double(), torch.tensor([5, 5]))
    with pytest.raises(ValueError, match=r"one length per sequence, shape \(2,\); got \(1,\)"):
        stage(x, torch.tensor([5]))
    torch.testing.assert_close(stage(x, [5, 3]), stage(x, torch.tensor([5, 3])))


@pytest.mark.parametrize("lengths", [[2.5, 4.0], [9, 0], [-1, 3], torch.tensor([True, True])])
def test_the_stage_checks_the_values_of_its_lengths_as_the_network_does(lengths):
    # Fractions were truncated, zero, negative, too long and boolean lengths ran, and
    # output_lengths came back as floats (cells43 review).
    stage = ConvStage(2, (3,), 2, pool=2)
    stage.reset_parameters(torch.Generator().manual_seed(0))
    with pytest.raises(ValueError, match=r"lengths must hold one integer length per sequence \(2\), each between 1 "
                                         r"and the padded length 4"):
        stage(torch.randn(2, 4, 2), lengths)
