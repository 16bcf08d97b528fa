"""Temporal gradients against a brute-force reference with parameters replicated per step."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from sklearn_rnn.nn import RecurrentNetwork, spectral_radius_
from sklearn_rnn.optim import RecurrentAdapter, TemporalGradients, _temporal, temporal_gradients

INPUT, HIDDEN, OUTPUT = 3, 5, 2


def make_batch(lengths, *, steps=None, seed=0, every_step=False, classes=False):
    gen = torch.Generator().manual_seed(seed)
    lengths = torch.tensor(lengths)
    steps = int(lengths.max()) if steps is None else steps
    x = torch.randn(len(lengths), steps, INPUT, generator=gen, dtype=torch.float64)
    # Padding is garbage on purpose: nothing may depend on it.
    x[torch.arange(steps)[None, :] >= lengths[:, None]] = 7.0
    shape = (len(lengths), steps) if every_step else (len(lengths),)
    if classes:
        y = torch.randint(0, OUTPUT, shape, generator=gen)
    else:
        y = torch.randn(*shape, OUTPUT, generator=gen, dtype=torch.float64)
    return x, lengths, y


def make_net(cell="tanh", seed=0, rho=1.2, *, num_layers=1, hidden_init="zero", dropout=0.0):
    net = RecurrentNetwork(INPUT, HIDDEN, OUTPUT, cell=cell, spectral_radius=rho, num_layers=num_layers,
                           hidden_init=hidden_init, dropout=dropout,
                           generator=torch.Generator().manual_seed(seed))
    gen = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():  # non-zero biases and initial states so that their gradients are exercised
        for _, projection, recurrence in net.stack():
            projection.bias.normal_(0, 0.1, generator=gen)
            if cell == "gru":
                recurrence.bias_hh_l0.normal_(0, 0.1, generator=gen)
        for initial in (net.initial_hidden, net.initial_cell):
            if initial is not None:
                initial.normal_(0, 0.5, generator=gen)
        net.readout.bias.fill_(0.05)
    return net.double()


def loss_fn(outputs, y, lengths):
    """Mean squared error; at every step, masked so that padding has zero weight."""
    if outputs.ndim == 2:
        return 0.5 * (outputs - y).square().sum(1).mean()
    mask = (torch.arange(outputs.shape[1])[None, :] < lengths[:, None]).to(outputs.dtype)  # (B, T)
    return 0.5 * ((outputs - y).square().sum(2) * mask).sum() / mask.sum()


def cell_step(cell, z, h, c, w_in, b, w_hh, b_hh):
    """One step of a cell, written from PyTorch's equations, on one sequence."""
    if cell in ("tanh", "relu"):
        f = torch.tanh if cell == "tanh" else torch.relu
        return f(w_in @ z + b + w_hh @ h), None
    if cell == "gru":
        gi, gh = w_in @ z + b, w_hh @ h + b_hh
        (i_r, i_z, i_n), (h_r, h_z, h_n) = gi.chunk(3), gh.chunk(3)
        r, u = torch.sigmoid(i_r + h_r), torch.sigmoid(i_z + h_z)
        n = torch.tanh(i_n + r * h_n)
        return (1 - u) * n + u * h, None
    i, f, g, o = (w_in @ z + b + w_hh @ h).chunk(4)
    c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
    return torch.sigmoid(o) * torch.tanh(c), c


def shared_parameters(net):
    """(name, parameter) in the order temporal gradients list them."""
    named = []
    for depth, (cell, projection, recurrence) in enumerate(net.stack()):
        cell = cell.name
        suffix = "" if depth == 0 else f"[{depth}]"
        named.append(("W_rec" + suffix, recurrence.weight_hh_l0))
        if cell == "gru":
            named.append(("b_rec" + suffix, recurrence.bias_hh_l0))
        named += [("W_in" + suffix, projection.weight), ("b" + suffix, projection.bias)]
    if net.initial_hidden is not None:
        named.append(("h_0", net.initial_hidden))
    if net.initial_cell is not None:
        named.append(("c_0", net.initial_cell))
    return named + [("W_out", net.readout.weight), ("b_out", net.readout.bias)]


def dropout_masks(net, batch, steps, seed, every_step):
    """The masks forward_states draws, in its order, from a generator seeded alike."""
    if net.dropout == 0:
        return None
    gen = torch.Generator().manual_seed(seed)
    keep = 1 - net.dropout
    draw = lambda *shape: torch.empty(*shape, dtype=torch.float64).bernoulli_(keep, generator=gen) / keep
    between = [draw(batch, steps, HIDDEN) for _ in range(net.num_layers - 1)]
    readout = draw(batch, steps, HIDDEN) if every_step else draw(batch, HIDDEN)
    return between, readout


def brute_force(net, x, lengths, y, *, every_step, loss=loss_fn, masks=None):
    """Per-step replicas of every parameter as leaves of plain autograd, step by step.

    Last-step losses: aligned step s of a sequence of length L is its step s - (T - L).
    Every-step losses: aligned step s is absolute position s. A learned initial state
    is used at each sequence's first step: its replica is that step's.
    """
    batch, steps, _ = x.shape
    named = shared_parameters(net)
    reps = {name: p.detach().expand(steps, *p.shape).clone().requires_grad_(True) for name, p in named}
    cells = [cell.name for cell, _, _ in net.stack()]
    outputs = []
    for i in range(batch):
        length = int(lengths[i])
        shift = 0 if every_step else steps - length
        h, c = [], []
        for depth in range(net.num_layers):
            h.append(reps["h_0"][shift][depth] if "h_0" in reps else torch.zeros(HIDDEN, dtype=torch.float64))
            c.append(reps["c_0"][shift][depth] if "c_0" in reps else torch.zeros(HIDDEN, dtype=torch.float64))
        per_step = [torch.zeros(OUTPUT, dtype=torch.float64) for _ in range(steps)]
        for t in range(length):
            s = t + shift
            z = x[i, t]
            for depth, cell in enumerate(cells):
                suffix = "" if depth == 0 else f"[{depth}]"
                if depth > 0 and masks is not None:
                    z = z * masks[0][depth - 1][i, t]
                b_hh = reps["b_rec" + suffix][s] if cell == "gru" else None
                h[depth], c[depth] = cell_step(cell, z, h[depth], c[depth], reps["W_in" + suffix][s],
                                               reps["b" + suffix][s], reps["W_rec" + suffix][s], b_hh)
                z = h[depth]
            if every_step:
                read = z if masks is None else z * masks[1][i, t]
                per_step[t] = reps["W_out"][s] @ read + reps["b_out"][s]
        if not every_step:
            read = z if masks is None else z * masks[1][i]
            outputs.append(reps["W_out"][steps - 1] @ read + reps["b_out"][steps - 1])
        else:
            outputs.append(torch.stack(per_step))
    value = loss(torch.stack(outputs), y, lengths)
    grads = torch.autograd.grad(value, list(reps.values()), allow_unused=True, materialize_grads=True)
    return list(grads), value


def fast(net, x, lengths, y, *, every_step, loss=loss_fn, dropout_seed=None, **kwargs):
    if dropout_seed is not None:
        net.dropout_generator("cpu").manual_seed(dropout_seed)
    states = net.forward_states(x, lengths, every_step=every_step)
    return temporal_gradients(net, states, loss(states.outputs, y, lengths), lengths, **kwargs)


ARCHITECTURES = {
    "one layer": {},
    "stacked": {"num_layers": 2, "hidden_init": "learned", "dropout": 0.3},
}


@pytest.mark.parametrize("cell", ["tanh", "relu", "gru", "lstm"])
@pytest.mark.parametrize("architecture", list(ARCHITECTURES))
@pytest.mark.parametrize("every_step", [False, True])
def test_matches_brute_force_on_variable_lengths(cell, architecture, every_step):
    net = make_net(cell, **ARCHITECTURES[architecture])
    x, lengths, y = make_batch([6, 3, 1, 5, 6], steps=7, every_step=every_step)
    masks = dropout_masks(net, 5, 7, seed=11, every_step=every_step)
    expected, value = brute_force(net, x, lengths, y, every_step=every_step, masks=masks)
    tg = fast(net, x, lengths, y, every_step=every_step, dropout_seed=11)

    assert tg.alignment == ("absolute" if every_step else "last")
    assert tg.names == tuple(name for name, _ in shared_parameters(net))
    if architecture == "one layer" and cell != "gru":
        assert tg.names == ("W_rec", "W_in", "b", "W_out", "b_out")
    torch.testing.assert_close(tg.loss, value.detach(), rtol=0, atol=1e-12)
    assert len(expected) == len(tg.names)
    for got, want, name in zip(tg.per_step(), expected, tg.names):
        assert got.shape == want.shape, name
        torch.testing.assert_close(got, want, rtol=0, atol=1e-6, msg=name)
    # Norms, combinations and cosines agree with the materialized reference.
    ref_norms = torch.stack([g.reshape(7, -1).square().sum(1) for g in expected]).sum(0).sqrt()
    for method in ("auto", "direct", "gram"):
        torch.testing.assert_close(tg.norms(method), ref_norms, rtol=0, atol=1e-6)
    coefficients = torch.linspace(0.1, 1.0, 7, dtype=torch.float64)
    for got, want in zip(tg.combine(coefficients), expected):
        torch.testing.assert_close(got, torch.tensordot(coefficients, want, dims=1), rtol=0, atol=1e-6)
    full = [g.sum(0) for g in expected]
    for got, want in zip(tg.gradient, full):
        torch.testing.assert_close(got, want, rtol=0, atol=1e-6)
    full_norm = torch.sqrt(sum(g.square().sum() for g in full))
    dots = sum(torch.tensordot(g.reshape(7, -1), w.reshape(-1), dims=1) for g, w in zip(expected, full))
    ref_cos = dots / (ref_norms * full_norm)
    torch.testing.assert_close(tg.cosines(), ref_cos, rtol=0, atol=1e-6, equal_nan=True)
    ref_blocks = {n: g.reshape(7, -1).norm(dim=1) for n, g in zip(tg.names, expected)}
    for name, got in tg.parameter_norms().items():
        torch.testing.assert_close(got, ref_blocks[name], rtol=0, atol=1e-6)


def test_cross_entropy_last_step_matches_brute_force():
    net = make_net("tanh", seed=3)
    x, lengths, y = make_batch([4, 2, 4], classes=True, seed=3)

    def ce(outputs, target, lengths):
        return F.cross_entropy(outputs, target)

    expected, _ = brute_force(net, x, lengths, y, every_step=False, loss=ce)
    for got, want in zip(fast(net, x, lengths, y, every_step=False, loss=ce).per_step(), expected):
        torch.testing.assert_close(got, want, rtol=0, atol=1e-6)


@pytest.mark.parametrize("every_step", [False, True])
def test_first_step_recurrent_gradient_is_zero(every_step):
    net = make_net()
    x, lengths, y = make_batch([5, 2, 4], every_step=every_step)
    tg = fast(net, x, lengths, y, every_step=every_step)
    w_rec = tg.per_step()[0]
    assert torch.all(w_rec[0] == 0)
    assert w_rec[1:].abs().sum() > 0
    # With h_0 = 0 no W_in or b gradient vanishes at the first step.
    assert tg.per_step()[1][0].abs().sum() > 0


def test_last_step_alignment_is_by_distance_from_the_loss():
    """A short sequence in a padded batch fills the last aligned steps, as it would alone."""
    net = make_net()
    x, lengths, y = make_batch([6, 3])
    short = fast(net, x[1:2, :3], lengths[1:2], y[1:2], every_step=False)
    long = fast(net, x[0:1], lengths[0:1], y[0:1], every_step=False)
    both = fast(net, x, lengths, y, every_step=False)
    for pair, alone_long, alone_short in zip(both.per_step(), long.per_step(), short.per_step()):
        # loss_fn averages over the batch: two sequences count half each.
        expected = alone_long.clone()
        expected[3:] += alone_short
        torch.testing.assert_close(pair * 2, expected, rtol=0, atol=1e-10)
    assert both.counts.tolist() == [1, 1, 1, 2, 2, 2]
    assert short.per_step()[3].shape[0] == 3  # the readout sits at the last aligned step
    assert torch.all(both.per_step()[3][:-1] == 0)


def test_every_step_alignment_is_by_absolute_position():
    net = make_net()
    x, lengths, y = make_batch([2, 5], every_step=True)

    def summed(outputs, target, lengths):  # a sum, so that sequences add up exactly
        mask = (torch.arange(outputs.shape[1])[None, :] < lengths[:, None]).to(outputs.dtype)
        return 0.5 * ((outputs - target).square().sum(2) * mask).sum()

    both = fast(net, x, lengths, y, every_step=True, loss=summed)
    first = fast(net, x[:1, :2], lengths[:1], y[:1, :2], every_step=True, loss=summed)
    second = fast(net, x[1:], lengths[1:], y[1:], every_step=True, loss=summed)
    for pair, a, b in zip(both.per_step(), first.per_step(), second.per_step()):
        expected = b.clone()
        expected[:2] += a
        torch.testing.assert_close(pair, expected, rtol=0, atol=1e-10)
    assert both.counts.tolist() == [2, 2, 1, 1, 1]


def test_grad_is_the_full_gradient_and_accumulates_like_backward():
    net = make_net()
    x, lengths, y = make_batch([4, 3, 4])
    loss_fn(net(x, lengths), y, lengths).backward()
    reference = [p.grad.clone() for p in net.parameters() if p.requires_grad]
    net.zero_grad()
    tg = fast(net, x, lengths, y, every_step=False)
    assert list(tg.parameters) == [net.recurrent_weight, net.input_projection.weight,
                                   net.input_projection.bias, net.readout.weight, net.readout.bias]
    by_param = {id(p): p.grad for p in tg.parameters}
    trainable = [p for p in net.parameters() if p.requires_grad]
    for p, want in zip(trainable, reference):
        torch.testing.assert_close(by_param[id(p)], want, rtol=0, atol=1e-12)
    fast(net, x, lengths, y, every_step=False)  # .grad adds up, as with backward()
    for p, want in zip(trainable, reference):
        torch.testing.assert_close(p.grad, 2 * want, rtol=0, atol=1e-12)
    net.zero_grad(set_to_none=True)
    fast(net, x, lengths, y, every_step=False, accumulate_grad=False)
    assert all(p.grad is None for p in net.parameters())


def test_frozen_parameters_are_left_out():
    net = make_net()
    net.readout.requires_grad_(False)
    x, lengths, y = make_batch([4, 2])
    tg = fast(net, x, lengths, y, every_step=False)
    assert tg.names == ("W_rec", "W_in", "b")
    expected, _ = brute_force(net, x, lengths, y, every_step=False)
    for got, want in zip(tg.per_step(), expected[:3]):
        torch.testing.assert_close(got, want, rtol=0, atol=1e-6)
    ref = torch.stack([g.reshape(4, -1).square().sum(1) for g in expected[:3]]).sum(0).sqrt()
    torch.testing.assert_close(tg.norms(), ref, rtol=0, atol=1e-6)


def test_single_feature_and_single_unit_keep_parameter_shapes():
    net = RecurrentNetwork(1, 1, 1, generator=torch.Generator().manual_seed(0)).double()
    x = torch.randn(2, 3, 1, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    lengths = torch.tensor([3, 2])
    states = net.forward_states(x, lengths)
    tg = temporal_gradients(net, states, states.outputs.sum(), lengths)
    assert [tuple(g.shape) for g in tg.gradient] == [tuple(p.shape) for p in tg.parameters]
    assert [tuple(g.shape[1:]) for g in tg.per_step()] == [tuple(p.shape) for p in tg.parameters]


@pytest.mark.parametrize("every_step", [False, True])
def test_unmaterialized_path_matches(monkeypatch, every_step):
    """Without room to keep per-step gradients, norms go by chunks and combinations by mm."""
    net = make_net()
    x, lengths, y = make_batch([7, 5, 6, 2], every_step=every_step)
    kept = fast(net, x, lengths, y, every_step=every_step)
    assert all(layer.outer is not None for layer in kept._layers)
    monkeypatch.setattr(_temporal, "_CHUNK_ELEMENTS", 4)  # one step per chunk, nothing kept
    lean = fast(net, x, lengths, y, every_step=every_step)
    assert all(layer.outer is None for layer in lean._layers)
    for method in ("auto", "direct", "gram"):
        torch.testing.assert_close(lean.norms(method), kept.norms("direct"), rtol=0, atol=1e-12)
    coefficients = torch.rand(7, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    pairs = [
        (lean.gradient, kept.gradient),
        (lean.combine(coefficients), kept.combine(coefficients)),
        (lean.per_step(), kept.per_step()),
        ((lean.cosines(),), (kept.cosines(),)),
        (tuple(lean.parameter_norms().values()), tuple(kept.parameter_norms().values())),
    ]
    for got, want in pairs:
        for a, b in zip(got, want, strict=True):
            torch.testing.assert_close(a, b, rtol=0, atol=1e-12, equal_nan=True)


def test_float32_norm_methods_agree():
    net = RecurrentNetwork(6, 50, 4, generator=torch.Generator().manual_seed(0))
    gen = torch.Generator().manual_seed(1)
    x, lengths = torch.randn(20, 30, 6, generator=gen), torch.randint(1, 31, (20,), generator=gen)
    states = net.forward_states(x, lengths)
    tg = temporal_gradients(net, states, states.outputs.square().sum(), lengths)
    torch.testing.assert_close(tg.norms("gram"), tg.norms("direct"), rtol=1e-4, atol=1e-7)
    assert "TemporalGradients(steps=30" in repr(tg)


@pytest.mark.parametrize("chunked", [False, True])
def test_float16_step_norms_are_summed_in_float32(monkeypatch, chunked):
    """In float16 the square of anything below about 2.4e-4 is zero: small steps' norms
    vanished, and the simplex direction left those steps unnormalized. The squares are
    summed in float32, from the float16 per-step gradients."""
    if chunked:
        monkeypatch.setattr(_temporal, "_CHUNK_ELEMENTS", 4)  # nothing kept: norms by chunks
    net = RecurrentNetwork(2, 4, 1, generator=torch.Generator().manual_seed(0)).half()
    x = torch.randn(3, 30, 2, generator=torch.Generator().manual_seed(1)).half()
    lengths = torch.tensor([30, 30, 30])
    states = net.forward_states(x, lengths)
    tg = temporal_gradients(net, states, states.outputs.float().square().mean(), lengths, accumulate_grad=False)
    per_step = [block.float().reshape(tg.steps, -1) for block in tg.per_step()]
    exact = torch.stack([block.square().sum(1) for block in per_step]).sum(0).sqrt()
    assert 0 < exact.min() < 2.4e-4  # steps whose float16 squares would underflow
    direct = tg.norms("direct")
    assert direct.dtype == torch.float32 and tg.gradient[0].dtype == torch.float16
    torch.testing.assert_close(direct, exact, rtol=1e-5, atol=0)
    torch.testing.assert_close(tg.norms("gram"), exact, rtol=1e-2, atol=0)  # from deltas, not rounded products
    for name, block in zip(tg.names, per_step):
        norms = tg.parameter_norms()[name]
        assert norms.dtype == torch.float32
        torch.testing.assert_close(norms, block.square().sum(1).sqrt(), rtol=1e-5, atol=0)


def test_errors_say_what_to_do():
    net = make_net()
    x, lengths, y = make_batch([3, 2])
    states = net.forward_states(x, lengths)
    loss = loss_fn(states.outputs, y, lengths)
    with pytest.raises(TypeError, match="RecurrentNetwork"):
        temporal_gradients(torch.nn.Linear(2, 2), states, loss, lengths)
    with pytest.raises(ValueError, match="scalar"):
        temporal_gradients(net, states, states.outputs, lengths)
    with pytest.raises(ValueError, match="between 1 and the padded length 3"):
        temporal_gradients(net, states, loss, torch.tensor([4, 2]))
    with pytest.raises(ValueError, match=r"shape \(2,\)"):
        temporal_gradients(net, states, loss, torch.tensor([3]))
    tg = temporal_gradients(net, states, loss, lengths)
    with pytest.raises(ValueError, match=r"shape \(3,\)"):
        tg.combine(torch.ones(2))
    with pytest.raises(ValueError, match="method"):
        tg.norms("fast")
    with torch.no_grad():
        frozen = net.forward_states(x, lengths)
    with pytest.raises(ValueError, match="torch.no_grad"):
        temporal_gradients(net, frozen, loss, lengths)


def test_a_loss_not_computed_from_the_states_is_refused():
    """Autograd's unused inputs, materialized as zeros, gave silent zero temporal
    gradients (and zeros in .grad) for a loss computed from another forward pass."""
    net = make_net(num_layers=2, hidden_init="learned")
    x, lengths, y = make_batch([3, 2])
    states = net.forward_states(x, lengths)
    fix = r"loss = criterion\(states\.outputs, y\)"
    other_pass = loss_fn(net(x, lengths), y, lengths)
    with pytest.raises(ValueError, match=r"loss must be computed from states\.outputs.*does not depend on "
                       r"states\.layers\[0\]\.projected or states\.layers\[1\]\.projected or "
                       r"states\.outputs.*" + fix):
        temporal_gradients(net, states, other_pass, lengths)
    states = net.forward_states(x, lengths)
    with pytest.raises(ValueError, match=r"does not depend on states\.outputs, whose.*" + fix):
        temporal_gradients(net, states, states.hidden.square().sum(), lengths)  # not the outputs
    states = net.forward_states(x, lengths)
    with pytest.raises(ValueError, match=r"got a loss without a gradient.*" + fix):
        temporal_gradients(net, states, loss_fn(states.outputs.detach(), y, lengths), lengths)
    assert all(p.grad is None for p in net.parameters())  # nothing written
    tg = temporal_gradients(net, states, loss_fn(states.outputs, y, lengths), lengths)
    assert "h_0" in tg.names and tg.gradient_norm > 0


def test_a_loss_at_every_step_on_padded_steps_is_refused():
    """The docstring said that what a loss puts past a sequence's end is left out; it went
    into b_out and, through the recurrence, into the valid steps' deltas. Such a loss is
    refused, with the fix; a masked one, as the estimators' (and loss_fn), is not."""
    net = make_net()
    x, lengths, y = make_batch([5, 4, 2], every_step=True)
    states = net.forward_states(x, lengths, every_step=True)
    unmasked = 0.5 * (states.outputs - y).square().sum()
    with pytest.raises(ValueError, match=r"padded steps \(past each sequence's length\) zero weight; got a loss "
                       r"whose gradient is nonzero at 4 padded steps \(the first: step 4 of sequence 1, whose "
                       r"length is 4\).*Mask it with the lengths"):
        temporal_gradients(net, states, unmasked, lengths)
    assert all(p.grad is None for p in net.parameters())  # nothing written
    states = net.forward_states(x, lengths, every_step=True)
    temporal_gradients(net, states, loss_fn(states.outputs, y, lengths), lengths)
    # A PyTorch module whose outputs are time-major: the padded steps are found there too.
    adapter = RecurrentAdapter(torch.nn.GRU(INPUT, HIDDEN), torch.nn.Linear(HIDDEN, OUTPUT)).double()
    states = adapter.forward_states(x.transpose(0, 1), lengths, every_step=True)  # (T, B, k)
    with pytest.raises(ValueError, match=r"nonzero at 4 padded steps \(the first: step 4 of sequence 1"):
        temporal_gradients(adapter, states, states.outputs.square().sum(), lengths)


def test_returns_temporal_gradients_object():
    net = make_net()
    x, lengths, y = make_batch([3])
    assert isinstance(fast(net, x, lengths, y, every_step=False), TemporalGradients)


# spectral_radius_ (thesis algorithm 3.1), which the temporal gradients at init depend on.


@pytest.mark.parametrize("rho", [0.8, 1.2])
def test_spectral_radius_init(rho):
    w = torch.empty(30, 30)
    spectral_radius_(w, rho, generator=torch.Generator().manual_seed(0))
    assert torch.linalg.eigvals(w.double()).abs().max().item() == pytest.approx(rho, rel=1e-5)
    again = spectral_radius_(torch.empty(30, 30), rho, generator=torch.Generator().manual_seed(0))
    assert torch.equal(w, again)


def test_spectral_radius_init_stacked_blocks_and_global_rng_untouched():
    state = torch.random.get_rng_state()
    w = spectral_radius_(torch.empty(3 * 8, 8), 1.1, generator=torch.Generator().manual_seed(2))
    assert torch.equal(state, torch.random.get_rng_state())
    for block in w.split(8):
        assert torch.linalg.eigvals(block.double()).abs().max().item() == pytest.approx(1.1, rel=1e-5)
    with pytest.raises(ValueError, match="square"):
        spectral_radius_(torch.empty(3, 2), 1.0)
    with pytest.raises(ValueError, match="positive"):
        spectral_radius_(torch.empty(3, 3), 0.0)


@pytest.mark.parametrize("std", [0.0, -0.1, float("nan"), float("inf"), True, "0.1", 1e-310])
def test_spectral_radius_init_refuses_a_std_that_is_not_finite_and_positive(std):
    # std=0 or NaN filled the matrix with NaN silently, and a negative std negated it;
    # 1e-310 underflowed the eigenvalue solver's squares (NaN weights, MKL's complaint).
    w = torch.zeros(3, 3)
    with pytest.raises(ValueError, match=r"std must be a finite number of at least 1.5e-154 .*got"):
        spectral_radius_(w, 1.2, std=std, generator=torch.Generator().manual_seed(0))
    assert torch.equal(w, torch.zeros(3, 3))


def test_spectral_radius_init_std_does_not_change_the_rescaled_matrix():
    # As its docstring now says: the draw is rescaled to rho, so std cancels.
    expected = spectral_radius_(torch.empty(6, 6), 1.2, generator=torch.Generator().manual_seed(0))
    for std in (1e-3, 1.0, 10.0):
        got = spectral_radius_(torch.empty(6, 6), 1.2, std=std, generator=torch.Generator().manual_seed(0))
        torch.testing.assert_close(got, expected)


def test_larger_radius_keeps_distant_temporal_gradients_alive():
    """Figure 3.1's point: with rho < 1 early steps' norms vanish, with rho > 1 far less."""
    gen = torch.Generator().manual_seed(0)
    x, lengths = torch.randn(50, 60, 6, generator=gen), torch.full((50,), 60)
    ratios = {}
    for rho in (0.5, 1.2):
        net = RecurrentNetwork(6, 50, 1, spectral_radius=rho, generator=torch.Generator().manual_seed(1))
        states = net.forward_states(x, lengths)
        norms = temporal_gradients(net, states, states.outputs.square().mean(), lengths).norms()
        ratios[rho] = (norms[5] / norms[-1]).item()
    assert ratios[0.5] < 1e-6
    assert ratios[1.2] > 1e3 * ratios[0.5]


@pytest.mark.parametrize("architecture", list(ARCHITECTURES))
def test_gru_reset_gates_kept_by_the_cpu_recurrence_equal_the_recomputed_ones(architecture):
    """On a CPU the step-by-step GRU keeps r_t for the temporal gradients; the fused
    kernels' path (no r_t kept) recomputes it. Both give the same temporal gradients."""
    net = make_net("gru", **ARCHITECTURES[architecture]).train(False)
    x, lengths, y = make_batch([6, 3, 1, 5, 6], steps=7)

    def gradients(keep_resets):
        net.zero_grad(set_to_none=True)
        states = net.forward_states(x, lengths)
        assert all(layer.resets is not None for layer in states.layers)
        if not keep_resets:
            states = states._replace(layers=tuple(layer._replace(resets=None) for layer in states.layers))
        loss = F.mse_loss(states.outputs, y)
        return temporal_gradients(net, states, loss, lengths).per_step()

    kept, recomputed = gradients(True), gradients(False)
    for a, b in zip(kept, recomputed, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-14)


def test_temporal_gradients_refuse_a_pooled_readout():
    net = RecurrentNetwork(2, 4, 2, readout="pool", generator=torch.Generator().manual_seed(0))
    x, lengths = torch.randn(3, 5, 2), torch.tensor([5, 4, 2])
    states = net.forward_states(x, lengths)
    with pytest.raises(ValueError, match="readout='last'"):
        temporal_gradients(net, states, states.outputs.square().mean(), lengths)


def test_a_loss_at_every_step_reaching_padded_states_is_refused():
    # A penalty on states.hidden over all steps, padded ones included, gave temporal
    # gradients that did not add up to the gradient (off by 0.10) without a word: the
    # aligned steps dropped the padded rows but kept what they sent into valid steps.
    gen = torch.Generator().manual_seed(0)
    net = RecurrentNetwork(2, 4, 1, generator=gen).double()
    x = torch.randn(3, 5, 2, generator=gen, dtype=torch.float64)
    lengths = torch.tensor([5, 3, 2])
    valid = (torch.arange(5)[None] < lengths[:, None])[..., None]
    states = net.forward_states(x, lengths, every_step=True)
    outputs = (states.outputs * valid).square().sum()
    with pytest.raises(ValueError, match=r"reaches the states of padded steps.*layer 0.*step 3 of sequence 1"):
        temporal_gradients(net, states, outputs + 0.1 * states.hidden.square().sum(), lengths)
    states = net.forward_states(x, lengths, every_step=True)  # the refused call freed the graph
    masked = (states.outputs * valid).square().sum() + 0.1 * (states.hidden * valid).square().sum()
    params = [p for p in net.parameters() if p.requires_grad]
    expected = torch.autograd.grad(masked, params, retain_graph=True)
    result = temporal_gradients(net, states, masked, lengths, accumulate_grad=False)
    by_parameter = {id(p): g for p, g in zip(result.parameters, result.gradient)}
    for parameter, gradient in zip(params, expected):
        torch.testing.assert_close(by_parameter[id(parameter)], gradient)


def test_unsigned_lengths_give_the_temporal_gradients_of_int64_ones():
    # numpy's uint16/uint32 lengths passed forward_states (the network widens them) but
    # crashed temporal_gradients: PyTorch has no min or max of unsigned tensors.
    import numpy as np

    net = make_net("gru")
    x, lengths, y = make_batch([4, 2, 3])
    adapter = RecurrentAdapter(torch.nn.GRU(INPUT, HIDDEN, batch_first=True), torch.nn.Linear(HIDDEN, OUTPUT)).double()
    unsigned = [lengths.numpy().astype(np.uint16), lengths.numpy().astype(np.uint32)]
    if hasattr(torch, "uint16"):
        unsigned.append(lengths.to(torch.uint16))
    for model in (net, adapter):
        states = model.forward_states(x, lengths)
        reference = temporal_gradients(model, states, loss_fn(states.outputs, y, lengths), lengths,
                                       accumulate_grad=False)
        for narrow in unsigned:
            states = model.forward_states(x, narrow)
            tg = temporal_gradients(model, states, loss_fn(states.outputs, y, lengths), narrow,
                                    accumulate_grad=False)
            torch.testing.assert_close(tg.norms(), reference.norms())
            for got, expected in zip(tg.gradient, reference.gradient):
                torch.testing.assert_close(got, expected)


@pytest.mark.parametrize("cell", ["tanh", "relu", "gru", "lstm"])
def test_an_empty_batch_has_zero_norms_and_a_simplex_step_that_moves_nothing(cell):
    # The network and temporal_gradients accept a batch of no sequences; then norms()
    # and SimplexSGD.step raised ZeroDivisionError (the Gram method's chunk of rows
    # divided by batch * batch). 'relu', which stops its state at each sequence's end,
    # raised "min(): Expected reduction dim to be specified" on the empty lengths.
    from sklearn_rnn.optim import SimplexSGD

    net = make_net(cell)
    x, lengths = torch.randn(0, 4, INPUT, dtype=torch.float64), torch.zeros(0, dtype=torch.long)
    states = net.forward_states(x, lengths)
    assert states.outputs.shape == net(x, lengths).shape == (0, OUTPUT)
    tg = temporal_gradients(net, states, states.outputs.sum(), lengths, accumulate_grad=False)
    for method in ("auto", "direct", "gram"):
        torch.testing.assert_close(tg.norms(method), torch.zeros(4, dtype=torch.float64))
    before = [p.detach().clone() for p in net.parameters()]
    optimizer = SimplexSGD(net.parameters(), lr=0.1, generator=0)
    optimizer.step(tg)
    assert optimizer.last_step["gradient_norm"] == 0.0
    for p, old in zip(net.parameters(), before):
        torch.testing.assert_close(p.detach(), old, rtol=0, atol=0)


@pytest.mark.parametrize("adapter", [False, True])
def test_states_of_another_network_are_refused_not_credited_to_this_one(adapter):
    import copy

    from sklearn_rnn.optim import RecurrentAdapter

    torch.manual_seed(0)
    if adapter:
        net = RecurrentAdapter(torch.nn.GRU(2, 4, batch_first=True), torch.nn.Linear(4, 1))
    else:
        net = RecurrentNetwork(2, 4, 1, generator=torch.Generator().manual_seed(0))
    copied = copy.deepcopy(net)  # e.g. a copy kept as the best model so far
    x, lengths, y = torch.randn(3, 5, 2), torch.tensor([5, 3, 1]), torch.randn(3, 1)
    states = net.forward_states(x, lengths)
    loss = F.mse_loss(states.outputs, y)
    # Before: the copy's parameters were given these gradients, and an optimizer over
    # them stepped the copy with another network's gradients.
    with pytest.raises(ValueError, match="states must come from network.forward_states of the network given"):
        temporal_gradients(copied, states, loss, lengths)
    states = net.forward_states(x, lengths)  # the refused call freed the graph
    loss = F.mse_loss(states.outputs, y)
    got = temporal_gradients(net, states, loss, lengths, accumulate_grad=False)
    expected = torch.autograd.grad(F.mse_loss(net.forward_states(x, lengths).outputs, y), got.parameters)
    for g, e in zip(got.gradient, expected):
        torch.testing.assert_close(g, e)
    net.readout.weight.requires_grad_(False)  # a frozen readout: nothing to check through it
    states = net.forward_states(x, lengths)
    assert temporal_gradients(net, states, F.mse_loss(states.outputs, y), lengths).steps == 5


@pytest.mark.parametrize("module", ["LSTM", "GRU", "RNN", None])
def test_a_frozen_bottom_layer_leaves_the_upper_layers_and_readout_their_gradients(module):
    # Fine-tuning the upper layers: the frozen bottom layer's projected inputs had no
    # graph, and temporal_gradients refused the network as if nothing trained.
    torch.manual_seed(0)
    if module is None:
        net = RecurrentNetwork(2, 3, 1, num_layers=2, generator=torch.Generator().manual_seed(0))
        bottom = [*net.input_projection.parameters(), *net.recurrence.parameters()]
    else:
        rnn = getattr(torch.nn, module)(2, 3, num_layers=2, batch_first=True)
        net = RecurrentAdapter(rnn, torch.nn.Linear(3, 1))
        bottom = [p for name, p in rnn.named_parameters() if name.endswith("l0")]
    for p in bottom:
        p.requires_grad_(False)
    x, lengths, y = torch.randn(3, 5, 2), torch.tensor([5, 3, 1]), torch.randn(3, 1)
    states = net.forward_states(x, lengths)
    assert not x.requires_grad  # the caller's tensor is left as it was
    got = temporal_gradients(net, states, F.mse_loss(states.outputs, y), lengths, accumulate_grad=False)
    assert got.names == ("W_rec[1]", "W_in[1]", "b[1]", "W_out", "b_out") if module is None else (
        "W_rec[1]", "b_rec[1]", "W_in[1]", "b[1]", "W_out", "b_out")
    expected = torch.autograd.grad(F.mse_loss(net.forward_states(x, lengths).outputs, y), got.parameters)
    for g, e in zip(got.gradient, expected):
        torch.testing.assert_close(g, e)


def test_a_network_with_every_parameter_frozen_is_refused_by_name():
    net = RecurrentNetwork(2, 3, 1, generator=torch.Generator().manual_seed(0)).requires_grad_(False)
    x, lengths = torch.randn(2, 4, 2), torch.tensor([4, 2])
    states = net.forward_states(x, lengths)
    # Before: an empty TemporalGradients, whose norms() and any SimplexSGD step over it
    # raised a bare IndexError.
    with pytest.raises(ValueError, match="every parameter of this RecurrentNetwork is frozen"):
        temporal_gradients(net, states, states.outputs.square().sum(), lengths)


@pytest.mark.parametrize("method", ["auto", "gram"])
def test_step_norms_stay_accurate_where_the_batchs_terms_cancel(method):
    # Two near-identical sequences with opposite residuals: each step's gradient is a
    # small difference of large terms. The Gram form's float32 rounding is of the order
    # of the terms: 'auto' (which picks it for a small batch and a wide layer) gave norms
    # up to 6 times too large, where the docs promise the methods agree up to rounding.
    torch.manual_seed(0)
    net = RecurrentAdapter(torch.nn.GRU(3, 64, batch_first=True), torch.nn.Linear(64, 1))
    first = torch.randn(1, 20, 3)
    x, lengths = torch.cat([first, first + 1e-4 * torch.randn(1, 20, 3)]), torch.tensor([20, 20])
    states = net.forward_states(x, lengths)
    y = states.outputs.detach() + torch.tensor([[1.0], [-1.0]])
    tg = temporal_gradients(net, states, F.mse_loss(states.outputs, y), lengths, accumulate_grad=False)
    got = tg.norms(method).double()  # before per_step(), whose kept products 'auto' would reuse
    exact = torch.stack([torch.cat([b[s].double().flatten() for b in tg.per_step()]).norm() for s in range(20)])
    torch.testing.assert_close(got, exact, rtol=1e-4, atol=0)


def test_the_adapter_refuses_inputs_and_readouts_of_another_dtype_by_name():
    # forward_states failed inside a matrix product ("mat1 and mat2 must have the same
    # dtype"), where the module's own forward explains itself.
    x, lengths = torch.randn(3, 5, 2), torch.tensor([5, 3, 1])
    net = RecurrentAdapter(torch.nn.GRU(2, 3, batch_first=True), torch.nn.Linear(3, 1))
    with pytest.raises(ValueError, match=r"x has dtype torch.float64 but the rnn's weights have dtype torch.float32"):
        net.forward_states(x.double(), lengths)
    mixed = RecurrentAdapter(torch.nn.GRU(2, 3, batch_first=True), torch.nn.Linear(3, 1).double())
    with pytest.raises(ValueError, match="the readout's weights have dtype torch.float64"):
        mixed.forward_states(x, lengths)
    assert net.double().forward_states(x.double(), lengths).outputs.dtype == torch.float64
    with torch.autocast("cpu", dtype=torch.bfloat16):  # autocast casts each operation's inputs
        assert net.float().forward_states(x, lengths).outputs.dtype == torch.bfloat16


def test_the_padding_message_of_a_time_major_adapter_gives_a_mask_in_its_layout():
    # The fix's mask was (batch, steps) for outputs of (steps, batch): following it failed
    # to broadcast, or (steps == batch) masked the wrong entries.
    torch.manual_seed(0)
    net = RecurrentAdapter(torch.nn.GRU(2, 3), torch.nn.Linear(3, 1))
    x, lengths, steps = torch.randn(5, 3, 2), torch.tensor([5, 3, 1]), 5
    states = net.forward_states(x, lengths, every_step=True)
    per_step = states.outputs.square().sum(-1)  # (steps, batch)
    with pytest.raises(ValueError, match=r"valid = torch.arange\(steps\)\[:, None\] < lengths\[None, :\]") as info:
        temporal_gradients(net, states, per_step.sum(), lengths)
    assert "of shape (steps, batch)" in str(info.value)
    states = net.forward_states(x, lengths, every_step=True)
    per_step = states.outputs.square().sum(-1)
    valid = torch.arange(steps)[:, None] < lengths[None, :]  # as the message says
    assert temporal_gradients(net, states, (per_step * valid).sum() / valid.sum(), lengths).steps == 5


def test_lengths_other_than_those_of_the_forward_pass_are_refused():
    # The right-alignment zeroed rows that held real deltas: a wrong gradient, written
    # into .grad as if it were backward()'s (0.38 off here).
    torch.manual_seed(0)
    net = RecurrentAdapter(torch.nn.GRU(2, 3, batch_first=True), torch.nn.Linear(3, 1))
    x = torch.randn(3, 5, 2)
    states = net.forward_states(x, torch.tensor([5, 5, 5]))
    assert states.lengths.tolist() == [5, 5, 5]
    with pytest.raises(ValueError, match=r"2 of the 3 differ: got \[5, 3, 1\], the pass ran with \[5, 5, 5\]"):
        temporal_gradients(net, states, states.outputs.sum(), torch.tensor([5, 3, 1]))
    assert all(p.grad is None for p in net.parameters())  # nothing written
    states = net.forward_states(x, [5, 3, 1])  # the same lengths in another type
    assert temporal_gradients(net, states, states.outputs.sum(), torch.tensor([5, 3, 1], dtype=torch.int32)).steps == 5


@pytest.mark.parametrize("dtype, rho, message", [
    (torch.float32, 1e39, "past the range of torch.float32"),
    (torch.float64, 1e308, "past the range of torch.float64"),
    (torch.int64, 1.2, "fills a floating-point matrix"),
])
def test_spectral_radius_init_refuses_what_would_not_be_that_radius(dtype, rho, message):
    # Accepted before: inf or NaN weights (a network then predicting NaN), or an int64
    # matrix holding the draw truncated, of radius 1.0 instead of 1.2.
    w = torch.zeros(3, 3, dtype=dtype)
    with pytest.raises(ValueError, match=message):
        spectral_radius_(w, rho, generator=torch.Generator().manual_seed(0))


def test_the_adapter_stops_a_relu_state_at_each_sequence_s_end_as_the_network_does():
    # forward_states ran a relu nn.RNN over the zero padding of short sequences: the
    # padded states overflowed to inf, and loss.backward() through them gave a NaN
    # weight_hh gradient while the temporal gradients (whose sum it should be) were finite.
    rnn, head = torch.nn.RNN(1, 4, nonlinearity="relu", batch_first=True), torch.nn.Linear(4, 1)
    with torch.no_grad():
        rnn.weight_hh_l0.copy_(torch.eye(4) * 1.6)
        rnn.bias_hh_l0.fill_(0.1)
        rnn.weight_ih_l0.fill_(1.0)
        rnn.bias_ih_l0.fill_(0.0)
    net = RecurrentAdapter(rnn, head)
    x = torch.full((2, 300, 1), -10.0)
    x[0, :2] = 1.0
    lengths = torch.tensor([2, 300])
    states = net.forward_states(x, lengths)
    assert bool(states.hidden.isfinite().all())
    assert bool((states.hidden[0, 2:] == 0).all())  # zeros after the end, as NetworkStates says
    with torch.no_grad():  # the valid steps' outputs are the module's own
        torch.testing.assert_close(states.outputs, net(x, lengths))
    loss = states.outputs.pow(2).mean()
    tg = temporal_gradients(net, states, loss, lengths)
    full = dict(zip(tg.names, tg.gradient))
    net.zero_grad()
    net.forward_states(x, lengths).outputs.pow(2).mean().backward()
    for name, parameter in rnn.named_parameters():
        assert bool(parameter.grad.isfinite().all()), name
    torch.testing.assert_close(rnn.weight_hh_l0.grad, full["W_rec"], rtol=1e-4, atol=1e-6)
    torch.testing.assert_close(rnn.weight_ih_l0.grad, full["W_in"], rtol=1e-4, atol=1e-6)
