"""Temporal gradients and SimplexSGD on a user's own torch.nn.RNN / GRU / LSTM model."""

import re
from pathlib import Path

import pytest
import torch
from torch import nn

from sklearn_rnn.optim import RecurrentAdapter, SimplexSGD, simplex_direction, temporal_gradients

CELLS = ["tanh", "relu", "gru", "lstm"]


def make_rnn(cell, num_layers=1, batch_first=True, bias=True, dropout=0.0, input_size=3, hidden=5):
    kwargs = dict(num_layers=num_layers, batch_first=batch_first, bias=bias, dropout=dropout)
    if cell in ("tanh", "relu"):
        return nn.RNN(input_size, hidden, nonlinearity=cell, **kwargs)
    return {"gru": nn.GRU, "lstm": nn.LSTM}[cell](input_size, hidden, **kwargs)


def ragged_batch(batch_first, seed=0):
    """4 sequences padded to 7 steps; the padding holds large values that must not matter."""
    gen = torch.Generator().manual_seed(seed)
    lengths = torch.tensor([7, 4, 1, 6])
    x = torch.randn(4, 7, 3, generator=gen)
    for b, length in enumerate(lengths.tolist()):
        x[b, length:] = 50.0
    return (x if batch_first else x.transpose(0, 1)), lengths


def autograd_gradient(net, loss):
    """The ordinary gradient of the user's model, by parameter identity."""
    params = list(net.parameters())
    return {id(p): g for p, g in zip(params, torch.autograd.grad(loss, params))}


def assert_matches_autograd(tg, reference):
    assert {id(p) for p in tg.parameters} == set(reference)
    for name, p, g in zip(tg.names, tg.parameters, tg.gradient):
        expected = reference[id(p)]
        assert g.shape == p.shape
        assert torch.allclose(g, expected, rtol=1e-4, atol=1e-5 * float(expected.abs().max()) + 1e-7), name


@pytest.mark.parametrize("cell", CELLS)
@pytest.mark.parametrize("num_layers", [1, 2])
@pytest.mark.parametrize("batch_first", [True, False])
def test_temporal_gradients_sum_to_the_models_own_gradient(cell, num_layers, batch_first):
    torch.manual_seed(0)
    net = RecurrentAdapter(make_rnn(cell, num_layers, batch_first), nn.Linear(5, 2))
    x, lengths = ragged_batch(batch_first)
    y = torch.randn(4, 2)
    reference = autograd_gradient(net, (net(x, lengths) - y).square().mean())  # the fused module

    states = net.forward_states(x, lengths)
    assert torch.allclose(states.outputs, net(x, lengths), atol=1e-5)
    tg = temporal_gradients(net, states, (states.outputs - y).square().mean(), lengths, accumulate_grad=False)
    assert_matches_autograd(tg, reference)
    # The per-step gradients sum to it, their norms agree however computed, and a
    # sequence of length 1 contributes to the last aligned step only.
    per_step = tg.per_step()
    for block, full in zip(per_step, tg.gradient):
        assert torch.allclose(block.sum(0), full, atol=1e-6)
    norms = torch.cat([b.reshape(tg.steps, -1) for b in per_step], 1).norm(dim=1)
    assert torch.allclose(tg.norms("direct"), norms, atol=1e-6)
    assert torch.allclose(tg.norms("gram"), norms, atol=1e-5)
    assert tg.counts.tolist() == [1, 2, 2, 3, 3, 3, 4]


@pytest.mark.parametrize("cell", CELLS)
@pytest.mark.parametrize("batch_first", [True, False])
def test_nan_padding_reaches_no_output_and_no_gradient(cell, batch_first):
    """Padding filled with NaN (as the estimators' arrays are padded) is read as zeros
    by both passes, as RecurrentNetwork reads it: fed to the module as it was, it made
    every weight's gradient and every temporal gradient NaN."""
    torch.manual_seed(0)
    net = RecurrentAdapter(make_rnn(cell, 2, batch_first), nn.Linear(5, 2))
    x, lengths = ragged_batch(batch_first)
    time = 1 if batch_first else 0
    valid = (torch.arange(x.shape[time])[:, None] < lengths).T  # (B, T)
    valid = valid if batch_first else valid.T
    zero, nan = x.masked_fill(~valid[..., None], 0.0), x.masked_fill(~valid[..., None], float("nan"))
    y = torch.randn(4, 2)
    results = []
    for padded in (zero, nan):
        fused = autograd_gradient(net, (net(padded, lengths) - y).square().mean())
        states = net.forward_states(padded, lengths)
        tg = temporal_gradients(net, states, (states.outputs - y).square().mean(), lengths, accumulate_grad=False)
        every = net.forward_states(padded, lengths, every_step=True).outputs
        results.append((fused, tg, every, net(padded, lengths, every_step=True)))
    (fused, tg, every, every_fused), (nan_fused, nan_tg, nan_every, nan_every_fused) = results
    assert all(torch.equal(fused[key], nan_fused[key]) for key in fused)
    assert all(torch.equal(a, b) for a, b in zip(tg.gradient, nan_tg.gradient))
    assert torch.equal(tg.norms(), nan_tg.norms()) and bool(torch.isfinite(nan_tg.norms()).all())
    assert torch.equal(every, nan_every) and torch.equal(every_fused, nan_every_fused)
    assert_matches_autograd(nan_tg, nan_fused)


@pytest.mark.parametrize("cell", ["tanh", "gru", "lstm"])
def test_every_step_readout_and_modules_without_bias(cell):
    torch.manual_seed(1)
    net = RecurrentAdapter(make_rnn(cell, 2, batch_first=False, bias=False), nn.Linear(5, 2))
    x, lengths = ragged_batch(batch_first=False, seed=1)
    y = torch.randn(7, 4, 2)
    mask = (torch.arange(7)[:, None] < lengths[None, :]).float()  # (T, B): padded steps weigh 0

    def loss_of(outputs):  # (T, B, 2): the layout of x
        return ((outputs - y).square().sum(2) * mask).sum() / mask.sum()

    reference = autograd_gradient(net, loss_of(net(x, lengths, every_step=True)))
    states = net.forward_states(x, lengths, every_step=True)
    assert states.outputs.shape == (7, 4, 2)
    tg = temporal_gradients(net, states, loss_of(states.outputs), lengths)
    assert tg.alignment == "absolute"
    assert not any(name.startswith("b") and name != "b_out" for name in tg.names)
    assert_matches_autograd(tg, reference)
    # accumulate_grad fills .grad as loss.backward() would.
    for p in tg.parameters:
        assert torch.allclose(p.grad, reference[id(p)], atol=1e-6)


class UserModel(nn.Module):
    """A plain PyTorch model: a GRU and a linear head."""

    def __init__(self):
        super().__init__()
        self.gru = nn.GRU(3, 5, num_layers=2, batch_first=True)
        self.head = nn.Linear(5, 2)


def test_simplex_sgd_steps_exactly_the_users_parameters():
    torch.manual_seed(2)
    model = UserModel()
    net = RecurrentAdapter(model.gru, model.head)
    assert {id(p) for p in net.parameters()} == {id(p) for p in model.parameters()}
    opt = SimplexSGD(model.parameters(), lr=0.1, clip_threshold=0.5, generator=0)
    x, lengths = ragged_batch(batch_first=True, seed=2)
    y = torch.randn(4, 2)
    before = {name: p.detach().clone() for name, p in model.named_parameters()}

    states = net.forward_states(x, lengths)
    tg = temporal_gradients(net, states, (states.outputs - y).square().mean(), lengths)
    opt.step(tg)
    assert opt.last_step["branch"] == "simplex"
    # What the functional core gives on the materialized per-step gradients, with the
    # same random stream, is what landed in the model's own tensors.
    chosen = simplex_direction(tg.per_step(), tg.gradient, generator=torch.Generator().manual_seed(0))
    expected = {id(p): d for p, d in zip(tg.parameters, chosen.direction)}
    alpha = opt.last_step["step_size"]
    assert alpha == pytest.approx(0.1 * 0.5 / chosen.gradient_norm)
    for name, p in model.named_parameters():
        step = p.detach() - before[name]
        assert step.abs().max() > 0, name
        assert torch.allclose(step, alpha * expected[id(p)], atol=1e-6), name


def test_simplex_sgd_switched_step_is_the_clipped_anti_gradient_of_the_model():
    torch.manual_seed(3)
    model = UserModel()
    net = RecurrentAdapter(model.gru, model.head)
    opt = SimplexSGD(model.parameters(), lr=0.1, clip_threshold=None, switch_threshold=0.0, generator=0)
    x, lengths = ragged_batch(batch_first=True, seed=3)
    y = torch.randn(4, 2)
    reference = autograd_gradient(net, (net(x, lengths) - y).square().mean())
    before = {id(p): p.detach().clone() for p in model.parameters()}
    states = net.forward_states(x, lengths)
    opt.step(temporal_gradients(net, states, (states.outputs - y).square().mean(), lengths))
    assert opt.last_step["branch"] == "switched"
    for p in model.parameters():
        assert torch.allclose(p.detach(), before[id(p)] - 0.1 * reference[id(p)], atol=1e-6)


def test_dropout_between_layers_applies_in_training_mode_only():
    torch.manual_seed(4)
    net = RecurrentAdapter(make_rnn("lstm", 2, dropout=0.5), nn.Linear(5, 1))
    x, lengths = ragged_batch(batch_first=True)
    trained = net.train().forward_states(x, lengths)
    assert not torch.allclose(trained.layers[1].inputs, trained.layers[0].hidden)
    evaluated = net.eval().forward_states(x, lengths)
    assert torch.equal(evaluated.layers[1].inputs, evaluated.layers[0].hidden)
    assert torch.allclose(evaluated.outputs, net(x, lengths), atol=1e-5)


def test_bad_modules_and_inputs_are_refused_with_a_way_out():
    head = nn.Linear(5, 1)
    with pytest.raises(TypeError, match="torch.nn.RNN, torch.nn.GRU or torch.nn.LSTM"):
        RecurrentAdapter(nn.Linear(3, 5), head)
    with pytest.raises(ValueError, match="bidirectional=False"):
        RecurrentAdapter(nn.GRU(3, 5, bidirectional=True), head)
    with pytest.raises(ValueError, match="proj_size=0"):
        RecurrentAdapter(nn.LSTM(3, 5, proj_size=2), head)
    with pytest.raises(TypeError, match="torch.nn.Linear"):
        RecurrentAdapter(nn.GRU(3, 5), nn.Sequential(head))
    with pytest.raises(ValueError, match=re.escape("torch.nn.Linear(5, n_outputs)")):
        RecurrentAdapter(nn.GRU(3, 5), nn.Linear(4, 1))
    net = RecurrentAdapter(nn.GRU(3, 5, batch_first=True), head)
    with pytest.raises(ValueError, match="3-D padded batch"):
        net.forward_states(torch.randn(7, 3), torch.tensor([7]))
    with pytest.raises(ValueError, match="between 1 and the padded length 7"):
        net.forward_states(torch.randn(2, 7, 3), torch.tensor([7, 8]))
    # A bare module is refused by temporal_gradients, which names the adapter.
    gru = nn.GRU(3, 5, batch_first=True)
    out = gru(torch.randn(2, 4, 3))[0]
    with pytest.raises(TypeError, match="RecurrentAdapter"):
        temporal_gradients(gru, out, out.sum(), torch.tensor([4, 4]))


PAGE = Path(__file__).resolve().parents[1] / "docs" / "user_guide" / "plain_pytorch.rst"


def page_code_blocks():
    """The ``.. code-block:: python`` blocks of the page, dedented, in order."""
    blocks = []
    lines = PAGE.read_text().splitlines()
    for i, line in enumerate(lines):
        if line.strip() != ".. code-block:: python":
            continue
        body = []
        for following in lines[i + 1 :]:
            if following.strip() and not following.startswith("   "):
                break
            body.append(following[3:])
        code = "\n".join(line for line in body if not line.lstrip().startswith(":name:"))
        blocks.append(code.strip("\n") + "\n")
    return blocks


def test_the_pages_training_loop_runs_as_printed_and_learns(capsys):
    loop, own_model = page_code_blocks()
    assert "nn.GRU" in loop and "opt.step(temporal_gradients(" in loop
    assert len([line for line in loop.splitlines() if line.strip()]) <= 26, "keep the loop short"
    namespace = {}
    with torch.random.fork_rng():  # the page seeds PyTorch's global generator
        exec(compile(loop, str(PAGE), "exec"), namespace)  # noqa: S102 (our own docs)
        printed = capsys.readouterr().out
        assert "test MSE" in printed
        before, after = namespace["before"], namespace["after"]
        assert before > 0.8  # predicting ~0: the first value is not yet remembered
        assert after < 0.3 * before, printed  # 0.999 -> 0.057 when written
        assert sum(namespace["opt"].branch_counts.values()) == 300
        assert namespace["opt"].branch_counts["simplex"] > 0

        # The second block: a user's model class wrapped by the adapter.
        exec(compile(own_model, str(PAGE), "exec"), namespace)  # noqa: S102
    model, net, opt = namespace["model"], namespace["net"], namespace["opt"]
    assert {id(p) for p in net.parameters()} == {id(p) for p in model.parameters()}
    x, lengths = torch.randn(6, 5, 3), torch.tensor([6, 2, 4, 6, 1])  # time-major
    model.eval()
    assert torch.allclose(model(x, lengths), net(x, lengths), atol=1e-6)
    before = [p.detach().clone() for p in model.parameters()]
    states = net.forward_states(x, lengths)
    loss = torch.nn.functional.cross_entropy(states.outputs, torch.tensor([0, 1, 2, 3, 0]))
    opt.step(temporal_gradients(net, states, loss, lengths))
    assert all(not torch.equal(b, p) for b, p in zip(before, model.parameters()))


# ------------------------------------------- found by trying the PyTorch-level API from outside
def test_a_network_refuses_inputs_of_another_width_and_lengths_outside_its_steps():
    # The fused LSTM kernel checks no shape: inputs of 5 features into a network of 2
    # gave NaN or arbitrary numbers (a read past the inputs); a length of 0 read step 0.
    from sklearn_rnn.nn import RecurrentNetwork

    x = torch.randn(3, 4, 2)
    for cell in ("lstm", "gru", "tanh"):
        net = RecurrentNetwork(2, 3, 1, cell=cell)
        with pytest.raises(ValueError, match=r"x has shape \(3, 4, 5\): expected \(batch, steps, 2\)"):
            net(torch.randn(3, 4, 5), torch.tensor([4, 2, 1]))
        for lengths in ([4, 0, 1], [4, -3, 1], [5, 2, 1], [4, 2], torch.tensor([4.0, 2.0, 1.0])):
            for run in (net, net.forward_states):
                with pytest.raises(ValueError, match=r"lengths must hold one integer length per sequence \(3\)"):
                    run(x, lengths)
        # Lists and arrays of lengths are read as tensors.
        torch.testing.assert_close(net(x, [4, 2, 1]), net(x, torch.tensor([4, 2, 1])))
    # A cell that reads a gap channel read it before the check: a bare IndexError.
    decay = RecurrentNetwork(4, 3, 1, cell="decay", gap_channel=3)
    with pytest.raises(ValueError, match=r"x has shape \(3, 4, 2\): expected \(batch, steps, 4\)"):
        decay(x, [4, 2, 1])
    # uint8 lengths indexed as a boolean mask: the wrong step was read out.
    net = RecurrentNetwork(2, 3, 1, cell="gru")
    same = torch.randn(2, 2, 2)
    for dtype in (torch.uint8, torch.int8, torch.int16, torch.int32):
        torch.testing.assert_close(net(same, torch.tensor([2, 2], dtype=dtype)), net(same, torch.tensor([2, 2])))


@pytest.mark.parametrize("kwargs, message", [
    (dict(hidden_size=0), r"hidden_size must be a positive int; got 0"),
    (dict(hidden_size=2.5), r"hidden_size must be a positive int; got 2.5"),
    (dict(input_size=0), r"input_size must be a positive int; got 0"),
    (dict(output_size=True), r"output_size must be a positive int; got True"),
    (dict(cell="decay", input_size=3, n_masked=2, gap_channel=2), r"n_masked=2: expected an int in \[0, 1\]"),
    (dict(cell="decay", input_size=3, n_masked=1, gap_channel=1), r"gap_channel=1: expected .* in \[2, 2\]"),
    (dict(cell="decay", input_size=3, n_masked=1, gap_channel=5), r"gap_channel=5: expected .* in \[2, 2\]"),
])
def test_a_network_refuses_sizes_and_channel_layouts_its_inputs_cannot_hold(kwargs, message):
    # They failed later with torch's "input_size must be greater than zero" for a zero
    # hidden size, a ZeroDivisionError, a bare IndexError, or ran with a gap channel
    # read as a mask.
    from sklearn_rnn.nn import RecurrentNetwork

    params = {**dict(input_size=3, hidden_size=4, output_size=1, cell="gru"), **kwargs}
    if "gap_channel" not in params and params["cell"] == "decay":
        params["gap_channel"] = 2
    with pytest.raises(ValueError, match=message):
        RecurrentNetwork(params.pop("input_size"), params.pop("hidden_size"), params.pop("output_size"), **params)


def test_the_adapter_follows_the_wrapped_modules_mode():
    # model.eval() does not reach the adapter (no child of the model): forward_states
    # kept dropping units between layers.
    torch.manual_seed(0)
    lstm, head = nn.LSTM(2, 4, num_layers=2, dropout=0.5, batch_first=True), nn.Linear(4, 1)
    adapter = RecurrentAdapter(lstm, head)
    lstm.eval()
    x, lengths = torch.randn(3, 5, 2), torch.tensor([5, 3, 1])
    first, second = adapter.forward_states(x, lengths).outputs, adapter.forward_states(x, lengths).outputs
    torch.testing.assert_close(first, second)
    torch.testing.assert_close(first, adapter(x, lengths), atol=1e-5, rtol=1e-5)


def test_optimizers_check_added_groups_and_keep_their_counts_in_state_dicts():
    from sklearn_rnn.optim import ClippedSGD

    w, b = nn.Parameter(torch.ones(2)), nn.Parameter(torch.ones(1))
    for optimizer in (ClippedSGD([w], lr=0.1), SimplexSGD([w], lr=0.1)):
        with pytest.raises(ValueError, match="lr must be positive; got -1.0"):
            optimizer.add_param_group({"params": [b], "lr": -1.0})  # went uphill
        with pytest.raises(ValueError, match="clip_threshold must be positive or None"):
            optimizer.add_param_group({"params": [b], "clip_threshold": 0.0})
    import numpy as np

    # numpy scalars are learning rates too (refused for a while by the group check)
    ClippedSGD([w], lr=np.float32(0.1)).add_param_group({"params": [b], "lr": np.int64(1)})
    SimplexSGD([w], lr=np.float64(0.1))
    clipped = ClippedSGD([w], lr=0.1)
    clipped.skipped_steps = 3
    restored = ClippedSGD([w], lr=0.1)
    restored.load_state_dict(clipped.state_dict())
    assert restored.skipped_steps == 3  # was 0


def test_the_adapter_refuses_fractional_and_boolean_lengths_as_the_network_does():
    # lengths [2.7, 4.0] read step 2 of the first sequence, [True, True] step 1 of both,
    # silently (.long() truncated them); forward_states(every_step=True) checked nothing,
    # and temporal_gradients truncated them too.
    from sklearn_rnn.nn import RecurrentNetwork

    torch.manual_seed(0)
    adapter = RecurrentAdapter(nn.GRU(2, 4, batch_first=True), nn.Linear(4, 1))
    network = RecurrentNetwork(2, 4, 1)
    x = torch.randn(2, 4, 2)
    message = r"lengths must hold one integer length per sequence \(2\), each between 1 and the padded length 4"
    for lengths in (torch.tensor([2.7, 4.0]), [2.7, 4.0], torch.tensor([True, True]), torch.tensor([4, 0]),
                    torch.tensor([[4, 2]])):
        for run in (adapter, adapter.forward_states, network, network.forward_states):
            for every_step in (False, True):
                with pytest.raises(ValueError, match=message):
                    run(x, lengths, every_step=every_step)
    states = adapter.forward_states(x, torch.tensor([2, 4]))
    with pytest.raises(ValueError, match=r"lengths must hold integers.*\(torch.float32\)"):
        temporal_gradients(adapter, states, states.outputs.sum(), torch.tensor([2.7, 4.0]))
    # Integer lengths of any width still read the same steps.
    for lengths in ([2, 4], torch.tensor([2, 4], dtype=torch.uint8), torch.tensor([2, 4], dtype=torch.int32)):
        torch.testing.assert_close(adapter(x, lengths), adapter(x, torch.tensor([2, 4])))
        torch.testing.assert_close(adapter.forward_states(x, lengths).outputs, adapter(x, torch.tensor([2, 4])),
                                   atol=1e-6, rtol=1e-6)


def test_a_packed_sequence_an_array_or_another_width_is_refused_with_a_way_out():
    # A PackedSequence gave "'PackedSequence' object has no attribute 'ndim'" (the
    # adapter and the network), and forward_states of 5 features into a module of 2
    # "mat1 and mat2 shapes cannot be multiplied".
    import numpy as np
    from torch.nn.utils.rnn import pack_padded_sequence

    from sklearn_rnn.nn import RecurrentNetwork

    x, lengths = torch.randn(2, 4, 2), torch.tensor([4, 2])
    packed = pack_padded_sequence(x, lengths, batch_first=True)
    network = RecurrentNetwork(2, 3, 1)
    for batch_first in (True, False):
        adapter = RecurrentAdapter(nn.GRU(2, 3, batch_first=batch_first), nn.Linear(3, 1))
        layout = "batch, steps" if batch_first else "steps, batch"
        for run in (adapter, adapter.forward_states, *((network, network.forward_states) if batch_first else ())):
            with pytest.raises(TypeError, match=re.escape(
                    f"x must be a torch.Tensor of right-padded sequences, ({layout}, features); got a "
                    f"PackedSequence: pass a right-padded tensor and lengths instead, which "
                    f"torch.nn.utils.rnn.pad_packed_sequence(x, batch_first={batch_first}) gives.")):
                run(packed, lengths)
            with pytest.raises(TypeError, match=r"got ndarray: convert it with torch.as_tensor\(x\)"):
                run(x.numpy(), lengths)
        wide = torch.randn(2, 4, 5) if batch_first else torch.randn(4, 2, 5)
        for run in (adapter, adapter.forward_states):
            with pytest.raises(ValueError, match=re.escape(
                    f"x has shape {tuple(wide.shape)}: expected ({layout}, 2), right-padded sequences "
                    "of the rnn's input_size=2 features.")):
                run(wide, lengths)
    assert np.isfinite(adapter(x.transpose(0, 1), lengths).detach().numpy()).all()  # time-major still runs


def test_a_scalar_length_is_told_to_be_a_list():
    # net(x, 5) for a batch of one met "object of type 'int' has no len()" (cells43).
    from sklearn_rnn.nn import RecurrentNetwork

    net = RecurrentNetwork(2, 3, 1, generator=torch.Generator().manual_seed(0))
    with pytest.raises(ValueError, match=r"lengths must hold one integer length per sequence of the batch; got 5\. "
                                         r"For a batch of one sequence, pass \[5\]\."):
        net(torch.randn(1, 5, 2), 5)
    assert net(torch.randn(1, 5, 2), [5]).shape == (1, 1)


@pytest.mark.parametrize("cell", ["tanh", "lstm", "decay"])
@pytest.mark.parametrize("grad", [True, False])
def test_an_empty_batch_of_no_steps_gives_no_outputs(cell, grad):
    # FlatSequences.batch of no index is (0, 0, d): the fused kernels refused a length of
    # 0 and the decay cell met an IndexError, where (0, T) batches give (0, 1) (core43).
    import numpy as np

    from sklearn_rnn.nn import RecurrentNetwork
    from sklearn_rnn.sequences import FlatSequences

    flat = FlatSequences.from_arrays([np.zeros((3, 3)), np.zeros((2, 3))])
    x, lengths = flat.batch(torch.tensor([], dtype=torch.long))
    gap = {"gap_channel": 2} if cell == "decay" else {}
    net = RecurrentNetwork(3, 4, 1, cell=cell, generator=torch.Generator().manual_seed(0), **gap)
    with torch.set_grad_enabled(grad):
        assert net(x.float(), lengths).shape == (0, 1)
