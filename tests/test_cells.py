"""Cells, stacked layers, dropout and initial states of RecurrentNetwork (issue 7)."""

from __future__ import annotations

import copy
import pickle
import warnings

import pytest
import torch
import torch.nn.functional as F

from sklearn_rnn.nn import RecurrentNetwork
from sklearn_rnn.nn._network import dropout
from sklearn_rnn.nn.cells import FORGET_BIAS
from sklearn_rnn.optim import SimplexSGD, _temporal, temporal_gradients

CELLS = ["tanh", "relu", "gru", "lstm"]
MODULES = {"tanh": torch.nn.RNN, "relu": torch.nn.RNN, "gru": torch.nn.GRU, "lstm": torch.nn.LSTM}


def network(cell, *, seed=0, **kwargs):
    return RecurrentNetwork(3, 5, 2, cell=cell, generator=torch.Generator().manual_seed(seed), **kwargs)


def batch(seed=0, dtype=torch.float64):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(4, 6, 3, generator=gen, dtype=dtype)
    return x, torch.tensor([6, 2, 1, 5])


@pytest.mark.parametrize("cell", CELLS)
def test_is_pytorchs_cell(cell):
    """The same weights in a plain torch.nn.RNN/GRU/LSTM give the same states."""
    net = network(cell, num_layers=2, spectral_radius=None).double()
    kwargs = {"nonlinearity": cell} if cell in ("tanh", "relu") else {}
    reference = MODULES[cell](3, 5, num_layers=2, batch_first=True, **kwargs).double()
    with torch.no_grad():
        for depth, (_, projection, recurrence) in enumerate(net.stack()):
            getattr(reference, f"weight_ih_l{depth}").copy_(projection.weight)
            getattr(reference, f"bias_ih_l{depth}").copy_(projection.bias)
            getattr(reference, f"weight_hh_l{depth}").copy_(recurrence.weight_hh_l0)
            b_hh = recurrence.bias_hh_l0 if cell == "gru" else torch.zeros_like(projection.bias)
            getattr(reference, f"bias_hh_l{depth}").copy_(b_hh)
    x, lengths = batch()
    # The network reads padded steps as zeros (padding never reaches an output).
    valid = (torch.arange(x.shape[1]) < lengths[:, None])[..., None]
    expected, _ = reference(x * valid)
    if cell == "relu":  # whose state is not bounded: it stops at each sequence's end
        expected = expected.masked_fill(~valid, 0.0)
    states = net.forward_states(x, lengths, every_step=True)
    torch.testing.assert_close(states.hidden, expected, rtol=0, atol=1e-12)
    torch.testing.assert_close(net(x, lengths, every_step=True), net.readout(expected), rtol=0, atol=1e-12)


@pytest.mark.parametrize("cell", CELLS)
def test_fused_and_identity_paths_agree_with_dropout_and_learned_state(cell):
    net = network(cell, num_layers=3, dropout=0.4, hidden_init="learned").double()
    with torch.no_grad():
        net.initial_hidden.normal_(generator=torch.Generator().manual_seed(1))
    x, lengths = batch()
    for every_step in (False, True):
        net.dropout_generator("cpu").manual_seed(5)
        fast = net(x, lengths, every_step=every_step)
        net.dropout_generator("cpu").manual_seed(5)
        states = net.forward_states(x, lengths, every_step=every_step)
        torch.testing.assert_close(fast, states.outputs, rtol=0, atol=1e-12)
        assert len(states.layers) == 3
        assert states.hidden is states.layers[-1].hidden
        assert states.projected is states.layers[0].projected
    # Evaluation mode: no dropout, the same outputs on every call.
    net.eval()
    torch.testing.assert_close(net(x, lengths), net(x, lengths), rtol=0, atol=0)


@pytest.mark.parametrize("cell", CELLS)
def test_the_vectorizable_forward_is_the_fused_one_and_vmaps_over_models(cell):
    """The step loop in plain tensor operations (the stacked trainer's) computes the
    fused kernel's function, and torch.func.vmap runs it over a stack of networks."""
    from torch.func import functional_call, vmap

    nets = [network(cell, seed=seed, num_layers=2, hidden_init="learned").double() for seed in (0, 1, 2)]
    for seed, net in enumerate(nets):
        with torch.no_grad():
            net.initial_hidden.normal_(generator=torch.Generator().manual_seed(10 + seed))
            if net.initial_cell is not None:
                net.initial_cell.normal_(generator=torch.Generator().manual_seed(20 + seed))
    x, lengths = batch()
    template = copy.deepcopy(nets[0])
    template.vectorizable = True
    assert not RecurrentNetwork.vectorizable and not nets[0].vectorizable  # fit's path: the fused kernel
    for every_step in (False, True):
        for net in nets:
            fused = net(x, lengths, every_step=every_step)
            plain = functional_call(template, dict(net.named_parameters()), (x, lengths), {"every_step": every_step})
            torch.testing.assert_close(plain, fused, rtol=0, atol=1e-12)
    params = {name: torch.stack([dict(net.named_parameters())[name] for net in nets]) for name, _ in
              nets[0].named_parameters()}
    stacked = vmap(lambda p, x, n: functional_call(template, p, (x, n)))(
        params, x.expand(3, *x.shape), lengths.expand(3, -1))
    torch.testing.assert_close(stacked, torch.stack([net(x, lengths) for net in nets]), rtol=0, atol=1e-12)


@pytest.mark.parametrize("cell", CELLS)
def test_dropout_never_touches_the_recurrence(cell):
    """With dropout in training mode the first layer's states are those without it."""
    net = network(cell, num_layers=2, dropout=0.5).double()
    x, lengths = batch()
    trained = net.forward_states(x, lengths)
    clean = net.eval().forward_states(x, lengths)
    torch.testing.assert_close(trained.layers[0].hidden, clean.layers[0].hidden, rtol=0, atol=0)
    dropped = trained.layers[1].inputs  # the first layer's states, dropped out
    kept = dropped != 0
    assert 0 < kept.float().mean() < 1
    torch.testing.assert_close(dropped[kept], 2 * clean.layers[0].hidden[kept], rtol=0, atol=1e-12)
    assert not torch.equal(trained.readout_inputs, clean.readout_inputs)


def test_dropout_masks_come_from_the_seed_not_the_global_generator():
    x, lengths = batch()
    a, b = network("lstm", dropout=0.5, seed=3).double(), network("lstm", dropout=0.5, seed=3).double()
    torch.manual_seed(0)
    first = a(x, lengths)
    torch.manual_seed(1)
    torch.testing.assert_close(b(x, lengths), first, rtol=0, atol=0)
    assert not torch.equal(a(x, lengths), first)  # the stream moves on
    # A pickled network carries its stream along.
    copied = pickle.loads(pickle.dumps(a))
    torch.testing.assert_close(copied(x, lengths), a(x, lengths), rtol=0, atol=0)
    out = dropout(torch.ones(2000, dtype=torch.float64), 0.25, torch.Generator().manual_seed(0))
    assert set(out.unique().tolist()) == {0.0, 4 / 3} and abs(float((out == 0).float().mean()) - 0.25) < 0.03


@pytest.mark.parametrize("cell", ["gru", "lstm"])
def test_spectral_radius_per_gate_block(cell):
    state = torch.random.get_rng_state()
    net = network(cell, num_layers=2, spectral_radius=1.1)
    assert torch.equal(state, torch.random.get_rng_state())
    gates = {"gru": 3, "lstm": 4}[cell]
    for _, projection, recurrence in net.stack():
        blocks = recurrence.weight_hh_l0.detach().double().split(5)
        assert len(blocks) == gates
        for block in blocks:
            assert torch.linalg.eigvals(block).abs().max().item() == pytest.approx(1.1, rel=1e-5)
        torch.testing.assert_close(recurrence.weight_ih_l0, torch.eye(5 * gates))
        assert not recurrence.weight_ih_l0.requires_grad
        bias = projection.bias.detach()
        if cell == "lstm":
            assert torch.all(bias[5:10] == FORGET_BIAS) and torch.all(bias[:5] == 0) and torch.all(bias[10:] == 0)
        else:
            assert torch.all(bias == 0) and torch.all(recurrence.bias_hh_l0 == 0)
            assert not recurrence.bias_ih_l0.requires_grad
    assert torch.equal(network(cell, spectral_radius=1.1).recurrent_weight, network(cell, spectral_radius=1.1).recurrent_weight)


def test_learned_initial_state_starts_at_zero_and_learns():
    x, lengths = batch()
    learned = network("lstm", hidden_init="learned", num_layers=2).double()
    zero = network("lstm", num_layers=2).double()
    assert learned.initial_hidden.shape == learned.initial_cell.shape == (2, 5)
    torch.testing.assert_close(learned(x, lengths), zero(x, lengths), rtol=0, atol=0)
    learned(x, lengths).square().sum().backward()
    assert learned.initial_hidden.grad.abs().sum() > 0 and learned.initial_cell.grad.abs().sum() > 0
    assert network("gru", hidden_init="learned").initial_cell is None


@pytest.mark.parametrize("cell", ["gru", "lstm"])
def test_learned_state_gives_the_first_step_a_recurrent_gradient(cell):
    x, lengths = batch()
    net = network(cell, hidden_init="learned").double()
    with torch.no_grad():
        net.initial_hidden.fill_(0.3)
    states = net.forward_states(x, lengths)
    tg = temporal_gradients(net, states, states.outputs.square().sum(), lengths)
    per_step = dict(zip(tg.names, tg.per_step()))
    first_rows = (6 - lengths).tolist()  # each sequence's first aligned step
    assert per_step["W_rec"][first_rows[0]].abs().sum() > 0
    assert set(torch.nonzero(per_step["h_0"].reshape(6, -1).abs().sum(1)).flatten().tolist()) == set(first_rows)


@pytest.mark.parametrize("every_step", [False, True])
def test_unmaterialized_path_matches_for_gated_stacks(monkeypatch, every_step):
    net = network("gru", num_layers=2, hidden_init="learned").double()
    x, lengths = batch()
    y = torch.randn(4, 6, 2, dtype=torch.float64) if every_step else torch.randn(4, 2, dtype=torch.float64)
    mask = (torch.arange(6)[None, :] < lengths[:, None]).double()[..., None]

    def run():
        states = net.forward_states(x, lengths, every_step=every_step)
        error = states.outputs - y
        loss = (error.square() * mask).sum() if every_step else error.square().sum()
        return temporal_gradients(net, states, loss, lengths, accumulate_grad=False)

    kept = run()
    monkeypatch.setattr(_temporal, "_CHUNK_ELEMENTS", 4)
    lean = run()
    assert all(layer.outer is None for layer in lean._layers)
    coefficients = torch.rand(6, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    for method in ("direct", "gram"):
        torch.testing.assert_close(lean.norms(method), kept.norms("direct"), rtol=0, atol=1e-12)
    for a, b in zip(lean.combine(coefficients), kept.combine(coefficients), strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-12)
    torch.testing.assert_close(lean.cosines(), kept.cosines(), rtol=0, atol=1e-12, equal_nan=True)


@pytest.mark.parametrize("cell", ["gru", "lstm"])
def test_simplex_sgd_steps_every_parameter_of_a_gated_stack(cell):
    net = network(cell, num_layers=2, hidden_init="learned", dropout=0.1)
    opt = SimplexSGD(net.parameters(), lr=0.2, generator=0)
    x, lengths = batch(dtype=torch.float32)
    y = torch.randn(4, 2, generator=torch.Generator().manual_seed(2))

    def evaluation_loss():
        with torch.no_grad():
            return F.mse_loss(net.eval()(x, lengths), y).item()

    before = [p.detach().clone() for p in net.parameters() if p.requires_grad]
    start = evaluation_loss()
    net.train()
    for _ in range(40):
        opt.zero_grad()
        states = net.forward_states(x, lengths)
        loss = F.mse_loss(states.outputs, y)
        opt.step(temporal_gradients(net, states, loss, lengths))
    after = [p.detach() for p in net.parameters() if p.requires_grad]
    assert all(not torch.equal(a, b) for a, b in zip(before, after))
    assert evaluation_loss() < 0.75 * start
    assert opt.branch_counts["simplex"] > 0


def test_errors_say_what_to_do():
    with pytest.raises(ValueError, match="num_layers must be a positive int"):
        network("gru", num_layers=0)
    with pytest.raises(ValueError, match=r"dropout must be a probability in \[0, 1\)"):
        network("gru", dropout=1.0)
    with pytest.raises(ValueError, match="hidden_init must be one of"):
        network("gru", hidden_init="noisy")
    with pytest.raises(ValueError, match="not available for cell='decay'"):
        RecurrentNetwork(3, 5, 2, cell="decay", gap_channel=0, hidden_init="learned")
    decay = RecurrentNetwork(3, 5, 2, cell="decay", gap_channel=0, num_layers=2)
    x, lengths = batch(dtype=torch.float32)
    states = decay.forward_states(x.abs(), lengths)
    assert decay(x.abs(), lengths).shape == (4, 2)
    with pytest.raises(ValueError, match="not available for cell='decay'"):
        temporal_gradients(decay, states, states.outputs.sum(), lengths)


def test_arguments_of_another_type_are_refused_by_name():
    # An int seed reached torch.randn ("received an invalid combination of arguments"),
    # dropout=None a comparison ("'<=' not supported between instances of 'int' and
    # 'NoneType'"), and lengths=None torch.as_tensor ("Could not infer dtype of NoneType").
    import numpy as np

    with pytest.raises(TypeError, match=r"generator must be a CPU torch.Generator, such as "
                                        r"torch.Generator\(\).manual_seed\(0\) .*; got 0 of type int"):
        RecurrentNetwork(3, 5, 2, generator=0)
    with pytest.raises(TypeError, match="generator must be a CPU torch.Generator"):
        network("tanh").reset_parameters(7)
    with pytest.raises(ValueError, match=r"dropout must be a probability in \[0, 1\); got None"):
        network("gru", dropout=None)
    assert network("gru", dropout=np.float32(0.25)).dropout == 0.25  # a numpy number is one
    net = network("gru", dropout=0.5)
    x, _ = batch(dtype=torch.float32)
    for run in (net, net.forward_states):
        with pytest.raises(ValueError, match=r"lengths must hold one integer length per sequence \(4\), each "
                                             r"between 1 and the padded length 6; got None\. .*torch.full\(\(4,\), 6\)"):
            run(x, None)


def test_deepcopy_keeps_parameters_and_stream():
    net = network("lstm", num_layers=2, dropout=0.3)
    twin = copy.deepcopy(net)
    x, lengths = batch(dtype=torch.float32)
    torch.testing.assert_close(twin(x, lengths), net(x, lengths), rtol=0, atol=0)


@pytest.mark.parametrize("cell", CELLS)
def test_temporal_gradients_of_a_bfloat16_autocast_forward(cell):
    """States computed under CPU autocast: temporal gradients in float32, close to exact."""
    net = network(cell, num_layers=2, hidden_init="learned")
    x, lengths = batch(dtype=torch.float32)
    y = torch.randn(4, 2, generator=torch.Generator().manual_seed(3))
    states = net.forward_states(x, lengths)
    exact = temporal_gradients(net, states, F.mse_loss(states.outputs, y), lengths, accumulate_grad=False)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        states = net.forward_states(x, lengths)
    # The projection ran in bfloat16; the CPU's step-by-step recurrence runs in the
    # parameters' float32 (nn/_stepwise.py), so its deltas are float32 too.
    assert states.projected.dtype == torch.float32
    low = temporal_gradients(net, states, F.mse_loss(states.outputs.float(), y), lengths, accumulate_grad=False)
    assert all(g.dtype == torch.float32 for g in low.gradient)
    torch.testing.assert_close(low.norms(), exact.norms(), rtol=0.05, atol=1e-6)


@pytest.mark.parametrize("build", [dict(readout="pool"), dict(conv_kernels=(3,)), dict(conv_kernels=(3,), conv_pool=2)])
def test_per_step_outputs_of_a_network_built_for_one_output_per_sequence_are_refused(build):
    # 'pool' failed inside the readout ("mat1 and mat2 shapes cannot be multiplied (8x3
    # and 9x1)"); a pooled stage gave ceil(T / pool) outputs where T were documented.
    from sklearn_rnn.nn import RecurrentNetwork

    net = RecurrentNetwork(2, 3, 1, generator=torch.Generator().manual_seed(1), **build)
    x, lengths = torch.randn(2, 5, 2), torch.tensor([5, 2])
    message = "readout='last'" if "readout" in build else "without conv_kernels"
    for run in (net, net.forward_states):
        with pytest.raises(ValueError, match=f"every_step=True.*{message}"):
            run(x, lengths, every_step=True)
    assert net(x, lengths).shape == (2, 1)


def test_plain_pytorch_inputs_get_the_networks_own_checks():
    # numpy sizes passed the checks and failed inside torch ("input_size should be of
    # type int"); unsigned lengths failed in torch ("min_all not implemented for
    # 'UInt32'"); an x of another dtype failed with "mat1 and mat2 must have the same
    # dtype"; conv widths 2.7 and '35' became 2 and (3, 5); the LSTM took (h_0,) as a
    # zero c_0 and the GRU ignored a c_0.
    import numpy as np

    from sklearn_rnn.nn import ConvStage
    from sklearn_rnn.nn.cells import stepwise_recurrence

    x = torch.randn(2, 4, 2)
    for cell in ("tanh", "gru", "lstm"):
        built = RecurrentNetwork(2, np.int64(3), np.int64(1), cell=cell, num_layers=np.int64(2),
                                 generator=torch.Generator().manual_seed(0))
        plain = RecurrentNetwork(2, 3, 1, cell=cell, num_layers=2, generator=torch.Generator().manual_seed(0))
        torch.testing.assert_close(built(x, [4, 2]), plain(x, [4, 2]), rtol=0, atol=0)
    net = RecurrentNetwork(2, 3, 1, generator=torch.Generator().manual_seed(0))
    expected = net(x, [4, 2])
    for dtype in (np.uint16, np.uint32, np.uint64):
        torch.testing.assert_close(net(x, np.array([4, 2], dtype=dtype)), expected, rtol=0, atol=0)
    with pytest.raises(ValueError, match=r"x is torch.float64, but the network's weights are torch.float32.*network.to"):
        net(x.double(), [4, 2])
    with pytest.raises(ValueError, match=r"x is torch.int64.*pass x.to\(torch.float32\)\.$"):
        net(x.long(), [4, 2])
    with torch.autocast("cpu", dtype=torch.bfloat16):  # autocast casts the inputs itself
        assert net(x.bfloat16(), [4, 2]).shape == (2, 1)
    for settings in (dict(kernel_sizes=(2.7,), channels=2), dict(kernel_sizes="35", channels=2),
                     dict(kernel_sizes=(3,), channels=2.5), dict(kernel_sizes=(3,), channels=2, pool=2.9)):
        with pytest.raises(ValueError, match="are whole numbers"):
            ConvStage(2, **settings)
    lstm = torch.nn.LSTM(8, 2, bias=False, batch_first=True)
    with pytest.raises(ValueError, match=r"\(h_0, c_0\) for cell='lstm'; got 1"):
        stepwise_recurrence("lstm", torch.randn(3, 5, 8), lstm.weight_hh_l0, None, (torch.zeros(3, 2),))
    gru = torch.nn.GRU(6, 2, batch_first=True)
    with pytest.raises(ValueError, match=r"\(h_0,\) for cell='gru'; got 2"):
        stepwise_recurrence("gru", torch.randn(3, 5, 6), gru.weight_hh_l0, gru.bias_hh_l0,
                            (torch.zeros(3, 2), torch.zeros(3, 2)))


def test_spectral_radius_values_that_cannot_be_reached_are_refused_by_name():
    # 0 was refused as "rho must be a positive float" (a name the caller never used),
    # 'auto' failed with "'>' not supported", inf filled the matrix with infinities, and
    # an empty matrix divided by zero.
    from sklearn_rnn.nn import spectral_radius_

    for radius in (0, "auto", float("inf"), True):
        with pytest.raises(ValueError, match=f"spectral_radius must be a finite positive number.*got {radius!r}"):
            RecurrentNetwork(2, 3, 1, spectral_radius=radius)
    with pytest.raises(ValueError, match=r"rho must be a finite positive number \(the largest eigenvalue modulus.*got inf"):
        spectral_radius_(torch.empty(3, 3), float("inf"))
    for shape in ((3, 0), (0, 0)):
        with pytest.raises(ValueError, match=r"n >= 1; got a tensor of shape"):
            spectral_radius_(torch.empty(shape), 1.0)


@pytest.mark.parametrize("cell", ["tanh", "gru", "lstm"])
def test_a_freeze_and_unfreeze_keeps_the_fused_modules_identity_frozen(cell):
    # requires_grad_(False) then (True) made weight_ih_l0 (and the GRU's bias_ih_l0)
    # trainable, and SimplexSGD then refused "8 trainable parameters ... 6 in common".
    net = RecurrentNetwork(2, 3, 1, cell=cell, num_layers=2, bidirectional=True,
                           generator=torch.Generator().manual_seed(1))
    trainable = [name for name, p in net.named_parameters() if p.requires_grad]
    assert net.requires_grad_(False) is net
    assert not any(p.requires_grad for p in net.parameters())
    net.requires_grad_(True)
    assert [name for name, p in net.named_parameters() if p.requires_grad] == trainable
    assert not any("weight_ih" in name or "bias_ih" in name for name in trainable)
    single = RecurrentNetwork(2, 3, 1, cell=cell, generator=torch.Generator().manual_seed(1))
    single.requires_grad_(False).requires_grad_(True)
    x, lengths = torch.randn(2, 4, 2), torch.tensor([4, 2])
    opt = SimplexSGD(single.parameters(), lr=0.1, generator=0)
    states = single.forward_states(x, lengths)
    opt.step(temporal_gradients(single, states, states.outputs.square().mean(), lengths))


@pytest.mark.parametrize("cell", [*CELLS, "decay"])
def test_the_cpu_draws_of_the_initialization_ignore_the_default_device(cell):
    # The draws documented as made on the CPU in float64 followed PyTorch's default
    # device: under `with torch.device("meta")` or torch.set_default_device(...) the
    # network could not be built ("Cannot copy out of meta tensor"). It is built on the
    # CPU, with the same values as without a default device.
    from sklearn_rnn.nn import spectral_radius_

    extra = dict(gap_channel=2) if cell == "decay" else dict(num_layers=2, bidirectional=True)
    for kwargs in (dict(extra), dict(extra, spectral_radius=None)):
        reference = network(cell, **kwargs).state_dict()
        with torch.device("meta"):
            built = network(cell, **kwargs).state_dict()
        torch.set_default_device("meta")
        try:
            default = network(cell, **kwargs).state_dict()
            w = spectral_radius_(torch.empty(3, 3, device="cpu"), 1.2, generator=torch.Generator().manual_seed(0))
        finally:
            torch.set_default_device(None)
        for state in (built, default):
            assert list(state) == list(reference)
            for name, value in reference.items():
                assert state[name].device.type == "cpu", name
                torch.testing.assert_close(state[name], value, rtol=0, atol=0)
    expected = spectral_radius_(torch.empty(3, 3), 1.2, generator=torch.Generator().manual_seed(0))
    torch.testing.assert_close(w, expected, rtol=0, atol=0)


@pytest.mark.parametrize("cell", ["tanh", "gru", "lstm"])
def test_simplex_sgd_names_the_identity_weights_an_attribute_unfreeze_made_trainable(cell):
    # `for p in net.parameters(): p.requires_grad = True` bypasses requires_grad_ and
    # unfreezes the fused modules' identity input weights; SimplexSGD then told the user
    # to build the optimizer with network.parameters(), which is what they had done.
    net = network(cell, num_layers=2)
    for p in net.parameters():
        p.requires_grad = False
    for p in net.parameters():
        p.requires_grad = True
    x, lengths = batch(dtype=torch.float32)
    opt = SimplexSGD(net.parameters(), lr=0.1, generator=0)
    states = net.forward_states(x, lengths)
    tg = temporal_gradients(net, states, states.outputs.square().mean(), lengths)
    fixed = ["recurrence.weight_ih_l0", "upper_layers.0.recurrence.weight_ih_l0"]
    if cell == "gru":
        fixed = ["recurrence.weight_ih_l0", "recurrence.bias_ih_l0",
                 "upper_layers.0.recurrence.weight_ih_l0", "upper_layers.0.recurrence.bias_ih_l0"]
    with pytest.raises(ValueError) as error:
        opt.step(tg)
    message = str(error.value)
    assert f"The optimizer trains {', '.join(fixed)}: the fused recurrence modules' fixed input weights" in message
    assert "call network.requires_grad_(True)" in message
    assert "Build the optimizer with network.parameters()" not in message  # what the user did
    # An optimizer missing parameters, or holding others, is told which.
    extra = torch.nn.Parameter(torch.zeros(3, 4))
    net.requires_grad_(True)
    with pytest.raises(ValueError, match=r"Not trained by the optimizer: (b_rec, )?W_in, b, .*W_out, b_out\. "
                                         r"Build the optimizer with network.parameters\(\)"):
        SimplexSGD([net.recurrent_weight], lr=0.1).step(tg)
    with pytest.raises(ValueError, match=r"Not covered by the temporal gradients: a tensor of shape \(3, 4\) "
                                         r"that is not the network's\. Build"):
        SimplexSGD([*net.parameters(), extra], lr=0.1).step(tg)


def _overflowing_relu(**kwargs):
    """A 'relu' network whose first layer's state grows by at least 1.5 at every step of
    zero input (a positive bias and recurrent matrix; every input weight -1, so that
    inputs of ones keep the state at zero): run past a short sequence's end, its state
    overflows float32 within 250 steps of padding and float64 within 2,000."""
    net = network("relu", spectral_radius=1.5, **kwargs)
    with torch.no_grad():
        for index, (_, projection, recurrence) in enumerate(net.stack() + net.reverse_stack()):
            first = index in (0, net.num_layers)
            projection.bias.fill_(0.5 if first else -0.5)
            projection.weight.fill_(-1.0)
            recurrence.weight_hh_l0.abs_()
    return net


def _overflows(net, steps, dtype):
    """Whether the first layer's state, run over ``steps`` zero inputs, overflows."""
    with torch.no_grad():
        zeros = torch.zeros(1, steps, 3, dtype=dtype)
        return not bool(net.recurrence(net.input_projection(zeros))[0].isfinite().all())


def _outputs_and_gradients(net, x, lengths, every_step, states):
    net.zero_grad()
    if states:
        outputs = net.forward_states(x, lengths, every_step=every_step).outputs
    else:
        outputs = net(x, lengths, every_step=every_step)
    if every_step:  # only the valid steps' outputs count, as in the every-step loss
        valid = torch.arange(x.shape[1]) < torch.as_tensor(lengths)[:, None]
        outputs = outputs[valid]
    outputs.square().sum().backward()
    return outputs.detach(), [p.grad.clone() for p in net.parameters() if p.grad is not None]


@pytest.mark.parametrize(
    "build, run",
    [
        (dict(readout="pool"), "train"),
        (dict(readout="pool", num_layers=2), "train"),
        (dict(readout="pool", bidirectional=True), "train"),
        (dict(readout="last"), "every_step"),
        (dict(readout="last", num_layers=2), "states"),
        (dict(readout="pool", num_layers=2), "vectorizable"),
        (dict(readout="pool", bidirectional=True), "fused"),
        (dict(readout="last"), "fused every_step"),
    ],
)
def test_a_relu_state_is_stopped_at_each_sequences_end(build, run, monkeypatch):
    """Padding a short sequence to a long batch mate's length neither makes its outputs
    nor the batch's gradients NaN: the gradients are those of each sequence alone."""
    from sklearn_rnn.nn import get_cell

    net = _overflowing_relu(**build)
    if "fused" in run:  # PyTorch's kernel under autograd (as on a GPU), not the CPU's loop
        monkeypatch.setattr(get_cell("relu"), "trains_stepwise", False)
    net.vectorizable = run == "vectorizable"
    every_step, states = "every_step" in run, run == "states"
    x = torch.ones(2, 600, 3)  # the long sequence: its state stays at zero
    x[0, :5] = torch.randn(5, 3, generator=torch.Generator().manual_seed(0))
    lengths = torch.tensor([5, 600])
    assert _overflows(net, 600, torch.float32)
    together, gradients = _outputs_and_gradients(net, x, lengths, every_step, states)
    assert all(bool(g.isfinite().all()) for g in gradients), "a gradient is not finite"
    short, short_gradients = _outputs_and_gradients(net, x[:1, :5], lengths[:1], every_step, states)
    long, long_gradients = _outputs_and_gradients(net, x[1:], lengths[1:], every_step, states)
    torch.testing.assert_close(together, torch.cat([short, long]), rtol=1e-4, atol=1e-5)
    for got, *alone in zip(gradients, short_gradients, long_gradients):
        torch.testing.assert_close(got, sum(alone), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("build", [dict(readout="pool"), dict(readout="last", num_layers=2),
                                   dict(readout="pool", bidirectional=True)])
def test_a_relu_prediction_does_not_depend_on_a_batch_mate_whose_padding_overflows(build):
    net = _overflowing_relu(**build).double().eval()
    x = torch.ones(2, 3000, 3, dtype=torch.float64)
    x[0, :5] = torch.randn(5, 3, generator=torch.Generator().manual_seed(0))
    lengths = torch.tensor([5, 3000])
    with torch.no_grad():
        together = net(x, lengths)
        alone = net(x[:1, :5], lengths[:1])
    assert _overflows(net, 3000, torch.float64)
    torch.testing.assert_close(together[:1], alone, rtol=0, atol=1e-12)


@pytest.mark.parametrize("cell", ["tanh", "relu", "gru", "lstm", "decay"])
def test_per_sample_gradients_by_torch_func_match_a_loop(cell):
    # vmap(grad(...)) failed for every cell with per-sample lengths (their check read
    # their values) and for 'relu' with any lengths (its overflow check read the states).
    from torch.func import functional_call, grad, vmap

    x, lengths = torch.randn(4, 5, 3, generator=torch.Generator().manual_seed(1)).abs(), torch.tensor([5, 3, 2, 5])
    gaps = {"gap_channel": 0} if cell == "decay" else {}  # the decay cell's gaps: channel 0, non-negative
    net = RecurrentNetwork(3, 4, 1, cell=cell, generator=torch.Generator().manual_seed(0), **gaps)
    params = {name: p.detach() for name, p in net.named_parameters() if p.requires_grad}

    def loss(params, one, length):
        return functional_call(net, params, (one[None], length[None])).sum()

    per_sample = vmap(grad(loss), in_dims=(None, 0, 0))(params, x, lengths)
    for row in range(4):
        net.zero_grad()
        net(x[row : row + 1], lengths[row : row + 1]).sum().backward()
        for name, p in net.named_parameters():
            if p.requires_grad:  # an empty parameter (no masked inputs) gets no .grad
                expected = torch.zeros_like(p) if p.grad is None else p.grad
                torch.testing.assert_close(per_sample[name][row], expected, atol=1e-5, rtol=1e-4)


def test_the_networks_input_checks_hold_under_autocast_and_for_an_empty_list_of_lengths():
    # Under autocast every dtype check was skipped: float64 and integer inputs, which
    # autocast does not cast, met raw matmul errors; lengths [] read as float32 were
    # refused with a message that contradicted itself.
    net = RecurrentNetwork(3, 4, 1, cell="gru", generator=torch.Generator().manual_seed(0))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        for dtype in (torch.float64, torch.int64):
            with pytest.raises(ValueError, match=f"x is {dtype}, but the network's weights are torch.float32"):
                net(torch.ones(2, 5, 3, dtype=dtype), [5, 2])
        assert net(torch.ones(2, 5, 3), [5, 2]).dtype == torch.bfloat16
    assert net(torch.zeros(0, 5, 3), []).shape == (0, 1)


@pytest.mark.parametrize("name", ["tanh", "relu", "gru", "lstm"])
def test_every_path_of_a_fused_cell_refuses_an_initial_state_of_another_shape(name):
    # Only the CPU step-by-step path checked initial: the fused kernels read it unchecked
    # (an LSTM state of one row for a batch of 4 read memory past its end and aborted
    # the process; PyTorch's (1, batch, hidden) layout gave a tanh layer 4-D states).
    from sklearn_rnn.nn.cells import get_cell

    cell = get_cell(name)
    projection, recurrence = torch.nn.Linear(2, cell.gates * 3), cell.make_recurrence(3)
    cell.reset_parameters(projection, recurrence, spectral_radius=1.2, generator=torch.Generator().manual_seed(0))
    z = torch.randn(4, 6, 2)
    shape = r"initial must hold tensors of shape \(batch, hidden\) = \(4, 3\)"
    for state in (torch.zeros(1, 3), torch.zeros(1, 4, 3), torch.zeros(3)):
        initial = (state,) * cell.state_count
        for path in (cell.forward, cell.forward_states, cell.forward_vectorizable):
            for grad in (True, False):
                with torch.set_grad_enabled(grad), pytest.raises(ValueError, match=shape):
                    path(projection, recurrence, z, initial, None)
    with pytest.raises(ValueError, match=r"initial must be \(\) for a zero initial state .* got 3 tensor"):
        cell.forward(projection, recurrence, z, (torch.zeros(4, 3),) * 3, None)
    good = (torch.randn(4, 3),) * cell.state_count
    with torch.no_grad():
        fused = cell.forward(projection, recurrence, z, good, None)
    torch.testing.assert_close(fused, cell.forward_states(projection, recurrence, z, good, None).hidden)


def test_the_decay_cell_names_its_missing_gaps_and_refuses_an_initial_state():
    # A missing gaps tensor failed a bare assert; an initial state was silently ignored.
    from sklearn_rnn.nn.cells import get_cell

    cell = get_cell("decay")
    projection, recurrence = torch.nn.Linear(2, 3), cell.make_recurrence(3, n_masked=0)
    z, gaps = torch.randn(4, 6, 2), torch.ones(4, 6)
    with pytest.raises(ValueError, match=r"cell='decay' reads the time since each previous step: pass gaps.*\(4, 6\)"):
        cell.forward(projection, recurrence, z, (), None)
    with pytest.raises(ValueError, match=r"cell='decay' starts from a zero state .* initial=\(\); got 1 tensor"):
        cell.forward(projection, recurrence, z, (torch.zeros(4, 3),), gaps)
    assert cell.forward(projection, recurrence, z, (), gaps).shape == (4, 6, 3)


def test_stepwise_recurrence_names_the_shape_of_the_initial_state():
    # PyTorch's hx layout (1, batch, hidden) gave "mat1 must be a matrix"; a wrong batch
    # size a resize warning and then a cryptic error.
    from sklearn_rnn.nn.cells import stepwise_recurrence

    gru = torch.nn.GRU(6, 2, batch_first=True)
    projected = torch.randn(3, 5, 6)
    for initial in (torch.zeros(1, 3, 2), torch.zeros(2, 2)):
        with pytest.raises(ValueError, match=r"initial must hold tensors of shape \(batch, hidden\) = \(3, 2\)"):
            stepwise_recurrence("gru", projected, gru.weight_hh_l0, gru.bias_hh_l0, (initial,))
    u, hidden, _ = stepwise_recurrence("gru", projected, gru.weight_hh_l0, gru.bias_hh_l0, (torch.zeros(3, 2),))
    assert hidden.shape == (3, 5, 2)


def test_the_core_s_inputs_and_sizes_get_messages_not_raw_errors():
    # cells45 2-6, 8; core45 5, 7: raw matrix-product or oneDNN errors under autocast for
    # a float64 network, lengths values stepwise_recurrence read as steps (True as 1, 0
    # as "stop before the first"), nested tensors met "Internal error ... file an issue",
    # unchecked constructor sizes, a float64 input promoted silently, and empty batches
    # of no steps given one step or refused by unfold.
    from sklearn_rnn.nn import ConvStage, DecayRecurrence
    from sklearn_rnn.nn.cells import stepwise_recurrence

    x, lengths = torch.rand(2, 5, 3), torch.tensor([5, 3])
    with torch.autocast("cpu", dtype=torch.bfloat16):
        for cell in ("gru", "lstm"):
            net = RecurrentNetwork(3, 4, 2, cell=cell).double()
            with pytest.raises(ValueError, match="x is torch.float32, but the network's weights are torch.float64"):
                net(x, lengths)
        with pytest.raises(ValueError, match="x is torch.float32, but the stage's weights are torch.float64"):
            ConvStage(3, (3,), 2).double()(x, lengths)
        assert RecurrentNetwork(3, 4, 2, cell="gru")(x, lengths).dtype == torch.bfloat16  # float32 weights: cast
    projected, weight = torch.randn(2, 4, 3), torch.randn(3, 3) * 0.5
    for bad in (torch.tensor([2.5, 4.0]), torch.tensor([0, 4]), torch.tensor([9, -1]), torch.tensor([True, True])):
        with pytest.raises(ValueError, match=r"lengths must hold one integer length per sequence \(2\), each between 1"):
            stepwise_recurrence("relu", projected, weight, None, (), lengths=bad)
    for layout in (torch.strided, torch.jagged):
        with warnings.catch_warnings():  # "the strided layout is in prototype stage"
            warnings.simplefilter("ignore", UserWarning)
            nested = torch.nested.nested_tensor([torch.rand(5, 3), torch.rand(2, 3)], layout=layout)
        with pytest.raises(TypeError, match=r"got a nested tensor: .*torch.nested.to_padded_tensor\(x, 0.0\)"):
            RecurrentNetwork(3, 4, 2)(nested, [5, 2])
    for size, masked in ((0, 0), (2.5, 0), (4, -1)):
        with pytest.raises(ValueError, match="DecayRecurrence needs hidden_size, a positive int, and n_masked"):
            DecayRecurrence(size, n_masked=masked)
    for size in ("3", 2.5, -1, 0):
        with pytest.raises(ValueError, match=f"reads input_size features, a positive int; got input_size={size!r}"):
            ConvStage(size, (3,), 2)
    decay = DecayRecurrence(2, n_masked=1)
    with pytest.raises(ValueError, match=r"DecayRecurrence: projected is torch.float64, but the recurrence's "
                                         r"weights are torch.float32: pass it .to\(torch.float32\)"):
        decay(torch.randn(2, 5, 2, dtype=torch.float64), torch.ones(2, 5))
    with pytest.raises(ValueError, match="decay_inputs: x is torch.float64, but the recurrence's weights"):
        decay.decay_inputs(torch.rand(1, 3, 2, dtype=torch.float64), torch.ones(1, 3))
    stage = ConvStage(3, (3,), 4, pool=2)
    stage.reset_parameters(torch.Generator().manual_seed(0))
    assert stage(torch.zeros(0, 0, 3), []).shape == (0, 0, 4)
    assert stage.output_lengths([3, 4]).tolist() == [2, 2]
    net = RecurrentNetwork(3, 4, 2, generator=torch.Generator().manual_seed(0))
    assert net(torch.zeros(0, 0, 3), [], every_step=True).shape == (0, 0, 2)
    assert net.forward_states(torch.zeros(0, 0, 3), [], every_step=True).outputs.shape == (0, 0, 2)
    assert net(torch.zeros(0, 5, 3), [], every_step=True).shape == (0, 5, 2)


def test_an_overflowing_time_since_observation_gives_no_nan_gradient():
    # cells45 1: the time since a feature's last observation, a sum of gaps that each
    # pass the check, overflowed to inf: input_decay's gradient was NaN (inf * 0), and a
    # later observation made the forward pass NaN too (0 * inf).
    from sklearn_rnn.nn import DecayRecurrence

    for dtype, gap in ((torch.float32, 2e38), (torch.float16, 4e4)):
        decay = DecayRecurrence(2, n_masked=1).to(dtype)
        x = torch.tensor([[[1.0, 1.0], [1.0, 0.0], [1.0, 0.0], [2.0, 1.0], [1.0, 0.0]]], dtype=dtype)
        out = decay.decay_inputs(x, torch.tensor([[0.0, gap, gap, 1.0, 1.0]], dtype=dtype))
        out[..., 0].float().sum().backward()
        assert bool(out.isfinite().all()), dtype
        assert out[0, :4, 0].tolist() == [1.0, 0.0, 0.0, 2.0]  # the baseline 0 where unobserved long
        assert bool(decay.input_decay.grad.isfinite().all()), dtype


def test_spectral_radius_refuses_a_radius_that_rounds_to_zero_and_writes_nothing_when_it_refuses():
    # core45 6: rho=1e-46 gave a float32 matrix of zeros (radius 0) silently; a refusal
    # on a stacked weight came after the blocks before it were overwritten.
    from sklearn_rnn.nn import spectral_radius_

    with pytest.raises(ValueError, match=r"rho=1e-46 gives weights below the normal range of torch.float32"):
        spectral_radius_(torch.empty(4, 4), 1e-46, generator=torch.Generator().manual_seed(0))
    weight = torch.zeros(16, 4)
    with pytest.raises(ValueError, match="gives weights past the range of torch.float32"):
        spectral_radius_(weight, 3.3e38, generator=torch.Generator().manual_seed(5))
    assert bool((weight == 0).all())
    small = spectral_radius_(torch.empty(4, 4), 1e-30, generator=torch.Generator().manual_seed(0))
    assert torch.linalg.eigvals(small.double()).abs().max().item() == pytest.approx(1e-30, rel=1e-6)


def test_the_core_s_newer_checks_give_advice_that_works():
    # diff45 5, 7, 8: an integer input to DecayRecurrence was told to convert the module
    # to int64 (which PyTorch refuses); ConvStage.output_lengths gave fractional and
    # negative "lengths"; spectral_radius_ accepted a radius lost in subnormals (1e-45:
    # 34 of 36 entries zero, 40% off).
    from sklearn_rnn.nn import ConvStage, DecayRecurrence, spectral_radius_

    with pytest.raises(ValueError, match=r"x is torch.int64, but the recurrence's weights are torch.float32: "
                                         r"pass it .to\(torch.float32\)\.$"):
        DecayRecurrence(4, n_masked=1).decay_inputs(torch.ones(2, 3, 2, dtype=torch.int64), torch.ones(2, 3))
    stage = ConvStage(2, (3,), 4, pool=2)
    for bad in ([3.5, 2], [-3, 0]):
        with pytest.raises(ValueError, match="lengths must hold integer lengths of at least 1 step"):
            stage.output_lengths(bad)
    with pytest.raises(ValueError, match="rho=1e-45 gives weights below the normal range of torch.float32"):
        spectral_radius_(torch.empty(6, 6), 1e-45, generator=torch.Generator().manual_seed(0))
