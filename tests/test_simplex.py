"""The simplex direction: hand-computed functional core, and SimplexSGD in plain PyTorch."""

from __future__ import annotations

import math
import pickle
import warnings
import re

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from sklearn_rnn.nn import RecurrentNetwork
from sklearn_rnn.optim._functional import _choose_directions
from sklearn_rnn.optim import (
    BRANCHES,
    ClippedSGD,
    SimplexSGD,
    choose_direction,
    clipped_step_,
    clipped_step_size,
    combine_temporal_gradients,
    convex_weights,
    normalization_factors,
    normalize_temporal_gradients,
    simplex_direction,
    step_norms,
    temporal_gradients,
)

t = torch.tensor


def close(a, b, atol=1e-12):
    torch.testing.assert_close(torch.as_tensor(a, dtype=torch.float64),
                               torch.as_tensor(b, dtype=torch.float64), rtol=0, atol=atol)


# ----------------------------------------------------------------------------- functional


def test_step_norms_is_one_norm_per_step_over_all_blocks():
    w = t([[[3.0, 0.0]], [[0.0, 1.0]], [[0.0, 0.0]]])  # (3 steps, 1, 2)
    b = t([[4.0], [0.0], [0.0]])  # (3 steps, 1)
    close(step_norms([w, b]), [5.0, 1.0, 0.0])


def test_normalization_factors_leave_small_and_non_finite_steps():
    norms = t([2.0, 1e-8, 0.99e-8, 0.0, math.nan, math.inf], dtype=torch.float64)
    close(normalization_factors(norms), [0.5, 1e8, 1.0, 1.0, 1.0, 1.0])
    close(normalization_factors(t([0.5, 0.05]), eps=0.1), [2.0, 1.0], atol=1e-6)


def test_normalize_temporal_gradients_by_hand():
    w = t([[3.0, 0.0], [0.0, 0.0], [1e-9, 0.0], [math.nan, 1.0]], dtype=torch.float64)
    b = t([[4.0], [2.0], [0.0], [1.0]], dtype=torch.float64)
    nw, nb = normalize_temporal_gradients([w, b])
    close(nw[:3], [[0.6, 0.0], [0.0, 0.0], [1e-9, 0.0]])  # step 3 is below 1e-8: as is
    close(nb[:3], [[0.8], [1.0], [0.0]])
    assert torch.isnan(nw[3, 0]) and nw[3, 1] == 1.0 and nb[3, 0] == 1.0  # NaN step: as is


@pytest.mark.parametrize("rule", ["exp", "dirichlet", "uniform"])
def test_convex_weights_reproduce_the_rules_by_hand(rule):
    beta = convex_weights(5, rule, generator=torch.Generator().manual_seed(7))
    gen = torch.Generator().manual_seed(7)
    if rule == "dirichlet":
        draw = torch.empty(5, dtype=torch.float64).exponential_(generator=gen)
    else:
        u = torch.rand(5, generator=gen, dtype=torch.float64)
        draw = torch.exp(1 - u) if rule == "exp" else u
    close(beta, draw / draw.sum())
    assert beta.shape == (5,) and bool((beta > 0).all())
    close(beta.sum(), 1.0)


def test_exp_weights_are_near_uniform_and_global_rng_untouched():
    state = torch.random.get_rng_state()
    beta = convex_weights(1000, "exp", generator=torch.Generator().manual_seed(0), dtype=torch.float32)
    assert torch.equal(state, torch.random.get_rng_state())
    assert beta.dtype == torch.float32
    assert (beta.max() / beta.min()).item() <= math.e + 1e-5
    other = convex_weights(1000, "exp", generator=torch.Generator().manual_seed(1), dtype=torch.float32)
    assert not torch.equal(beta, other)


def test_convex_weights_errors():
    with pytest.raises(ValueError, match=r"weights must be one of \['exp', 'dirichlet', 'uniform'\]"):
        convex_weights(3, "softmax")
    with pytest.raises(ValueError, match="at least 1"):
        convex_weights(0)


def test_combine_by_hand():
    w = t([[[1.0, 0.0]], [[0.0, 2.0]], [[4.0, 4.0]]])  # (3, 1, 2)
    b = t([[1.0], [1.0], [1.0]])
    cw, cb = combine_temporal_gradients([w, b], t([0.5, 0.25, 0.0]))
    close(cw, [[0.5, 0.5]])
    close(cb, [0.75])
    with pytest.raises(ValueError, match=r"shape \(3,\)"):
        combine_temporal_gradients([w, b], t([1.0, 1.0]))
    with pytest.raises(ValueError, match="steps as its first axis"):
        combine_temporal_gradients([w, t([1.0, 2.0])], t([1.0, 1.0, 1.0]))


def test_choose_direction_simplex_rescales_to_gradient_norm():
    d = choose_direction([t([3.0, 4.0])], [t([0.0, 1.0])])
    assert d.branch == "simplex"
    close(d.direction[0], [0.0, -5.0])
    assert d.gradient_norm == pytest.approx(5.0)
    assert d.cosine == pytest.approx(-0.8)


def test_choose_direction_over_several_blocks():
    d = choose_direction([t([1.0, 2.0]), t([2.0])], [t([0.0, 0.0]), t([1.0])])
    assert d.branch == "simplex"
    close(d.direction[0], [0.0, 0.0])
    close(d.direction[1], [-3.0])
    assert d.cosine == pytest.approx(-2 / 3)


@pytest.mark.parametrize(
    "combination",
    [
        [t([-1.0, 0.0])],  # candidate (5, 0): an ascent direction
        [t([4.0, -3.0])],  # candidate orthogonal to the gradient: cosine 0 is not descent
        [t([0.0, 0.0])],  # nothing to rescale
        [t([math.nan, 1.0])],  # not finite
    ],
)
def test_choose_direction_falls_back_to_the_anti_gradient(combination):
    d = choose_direction([t([3.0, 4.0])], combination)
    assert d.branch == "descent_fallback"
    close(d.direction[0], [-3.0, -4.0])
    assert d.cosine == -1.0


def test_choose_direction_switches_above_the_threshold_without_combining():
    def never():
        raise AssertionError("the combination must not be computed when switching")

    d = choose_direction([t([3.0, 4.0])], never, switch_threshold=4.9)
    assert d.branch == "switched"
    close(d.direction[0], [-3.0, -4.0])
    # At the threshold itself it does not switch (algorithm 3.2: norm > psi).
    assert choose_direction([t([3.0, 4.0])], [t([0.0, 1.0])], switch_threshold=5.0).branch == "simplex"


def test_choose_direction_skips_a_non_finite_gradient():
    d = choose_direction([t([math.inf, 0.0])], [t([0.0, 1.0])])
    assert d.branch == "skipped" and d.direction is None and math.isnan(d.cosine)
    assert choose_direction([t([math.nan])], [t([1.0])], switch_threshold=0.1).branch == "skipped"
    with pytest.raises(ValueError, match="one block per gradient block"):
        choose_direction([t([1.0]), t([1.0])], [t([1.0])])


def test_simplex_direction_by_hand():
    # Step 1: (0, 2), norm 2 -> (0, 1). Step 2: (1, 0), norm 1 -> (1, 0). Step 3: tiny, kept.
    temporal = [t([[0.0, 2.0], [1.0, 0.0], [1e-9, 0.0]], dtype=torch.float64)]
    beta = convex_weights(3, "exp", generator=torch.Generator().manual_seed(3))
    g = t([beta[1] + beta[2] * 1e-9, beta[0]], dtype=torch.float64)
    gradient_norm = math.hypot(1 + 1e-9, 2.0)
    expected = -gradient_norm * g / g.norm()
    d = simplex_direction(temporal, generator=torch.Generator().manual_seed(3))
    assert d.branch == "simplex"
    close(d.direction[0], expected)
    assert d.gradient_norm == pytest.approx(gradient_norm)
    # An explicit gradient is used as given, and switching consumes the same draws.
    switched = simplex_direction(temporal, [t([30.0, 40.0])], switch_threshold=1.0)
    close(switched.direction[0], [-30.0, -40.0])


def test_clipped_step_by_hand():
    w = torch.zeros(2)
    assert clipped_step_([w], [t([-3.0, -4.0])], lr=0.1, clip_threshold=1.0) == pytest.approx(0.02)
    close(w, [-0.06, -0.08], atol=1e-7)
    w.zero_()
    assert clipped_step_([w], [t([0.3, 0.4])], lr=0.1, clip_threshold=1.0) == 0.1
    assert clipped_step_([w], [t([30.0, 40.0])], lr=0.1, clip_threshold=None) == 0.1
    # The norm of the whole direction, when only a part (one group) is stepped.
    step = clipped_step_([w], [t([0.3, 0.4])], lr=0.1, clip_threshold=1.0, direction_norm=10.0)
    assert step == pytest.approx(0.01)
    with pytest.raises(ValueError, match="pair up"):
        clipped_step_([w, w], [t([1.0, 1.0])], lr=0.1, clip_threshold=1.0)


def test_float16_steps_are_normalized_and_combined_in_float32():
    """Float16 squares of entries below about 2.4e-4 are zero, and 1 / norm of a step
    below about 1.5e-5 overflows: norms, factors and weights are float32, and only the
    direction is cast to float16, as the float32 rule on the same values gives it."""
    gen = torch.Generator().manual_seed(0)
    temporal = [(torch.randn(4, 3, 2, generator=gen) * 1e-5).half(), (torch.randn(4, 3, generator=gen) * 1e-4).half()]
    gradient = [block.sum(0) for block in temporal]
    norms = step_norms(temporal)
    assert norms.dtype == torch.float32
    wide = [block.float() for block in temporal]
    close(norms, step_norms(wide), atol=0)
    assert bool((norms > 0).all())
    normalized = normalize_temporal_gradients(temporal)
    assert normalized[0].dtype == torch.float16
    close(step_norms(normalized), [1.0] * 4, atol=2e-3)
    combined = combine_temporal_gradients(temporal, normalization_factors(norms))
    assert combined[0].dtype == torch.float32 and all(bool(torch.isfinite(c).all()) for c in combined)
    chosen = simplex_direction(temporal, gradient, generator=torch.Generator().manual_seed(2))
    reference = simplex_direction(wide, [g.float() for g in gradient], generator=torch.Generator().manual_seed(2))
    assert chosen.branch == reference.branch == "simplex"
    for got, want in zip(chosen.direction, reference.direction, strict=True):
        assert got.dtype == torch.float16 and torch.equal(got, want.half())


# ----------------------------------------------------------------------------- optimizer


def make_problem(seed=0, dtype=torch.float64):
    gen = torch.Generator().manual_seed(seed)
    net = RecurrentNetwork(3, 6, 2, generator=gen).to(dtype)
    x = torch.randn(8, 9, 3, generator=gen, dtype=dtype)
    lengths = torch.randint(1, 10, (8,), generator=gen)
    y = torch.randint(0, 2, (8,), generator=gen)
    return net, x, lengths, y


def temporal_of(net, x, lengths, y):
    states = net.forward_states(x, lengths)
    return temporal_gradients(net, states, F.cross_entropy(states.outputs, y), lengths)


def test_step_follows_the_functional_reference():
    net, x, lengths, y = make_problem()
    opt = SimplexSGD(net.parameters(), lr=0.5, clip_threshold=0.01, generator=11)
    tg = temporal_of(net, x, lengths, y)
    before = [p.detach().clone() for p in tg.parameters]
    reference = simplex_direction(tg.per_step(), tg.gradient, generator=torch.Generator().manual_seed(11))
    opt.step(tg)
    assert reference.branch == "simplex" and opt.last_step["branch"] == "simplex"
    alpha = 0.5 * min(1.0, 0.01 / reference.gradient_norm)
    assert opt.last_step["step_size"] == pytest.approx(alpha)
    after = [p.detach() for p in tg.parameters]
    for b, a, d in zip(before, after, reference.direction, strict=True):
        close(a, b + alpha * d)
    assert opt.branch_counts == {"simplex": 1, "descent_fallback": 0, "switched": 0, "skipped": 0}


HOST_READS = ("item", "tolist", "numpy", "cpu", "__bool__", "__int__", "__float__", "__index__")


@pytest.mark.parametrize(("switch_threshold", "most"), [(None, 2), (1e6, 3)])
def test_an_update_reads_few_values_on_the_host(monkeypatch, switch_threshold, most):
    """Each value read on the host makes a GPU's host wait for the device, which then
    idles until the next launches (on an H200 the device was busy for 6.2 of a tanh
    update's 10.6 ms). The temporal gradients and the step read: the lengths' extremes
    (one read for both, which also tells whether the batch is ragged), the gradient's
    norm when switching is on (whether to combine at all), and the branch's inputs.
    The full gradient's norm as a float is only computed when read."""
    net, x, lengths, y = make_problem()
    opt = SimplexSGD(net.parameters(), lr=0.1, switch_threshold=switch_threshold, generator=0)
    reads = []
    for name in HOST_READS:
        def read(self, *args, _name=name, _original=getattr(torch.Tensor, name), **kwargs):
            reads.append(_name)
            return _original(self, *args, **kwargs)
        monkeypatch.setattr(torch.Tensor, name, read)
    states = net.forward_states(x, lengths)
    loss = F.cross_entropy(states.outputs, y)
    reads.clear()  # the forward pass and the loss are the caller's
    opt.step(temporal_gradients(net, states, loss, lengths))
    assert len(reads) <= most, reads
    assert opt.branch_counts["simplex"] == 1


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
def test_the_simplex_direction_scales_by_the_hosts_quotient(dtype):
    """The rule divides -||grad|| by ||g|| where the norms are, in their dtype (at least
    float32); the direction is bit for bit the combination times the host's float64
    quotient rounded to that dtype, cast once to the gradient's (rows of 2,000 models at
    once, norms over some 20 orders of magnitude)."""
    gen = torch.Generator().manual_seed(0)
    size = torch.exp(torch.randn(2000, 1, generator=gen, dtype=torch.float64) * 3)
    gradient = (torch.randn(2000, 7, generator=gen, dtype=torch.float64) * size).to(dtype)
    noise = torch.randn(2000, 7, generator=gen, dtype=torch.float64) * 0.1
    combination = (gradient.double() * (1 + noise) * torch.exp(torch.randn(2000, 1, generator=gen) * 3)).to(dtype)
    gradient_norm = torch.linalg.vector_norm(gradient, dim=1)
    chosen = _choose_directions(gradient, gradient_norm, combination, [None] * 2000)
    assert set(chosen.branch) == {"simplex"}
    work = torch.promote_types(dtype, torch.float32)
    quotients = [-a / b for a, b in zip(gradient_norm.tolist(),
                                        torch.linalg.vector_norm(combination.to(work), dim=1).tolist())]
    expected = (torch.tensor(quotients, dtype=work)[:, None] * combination.to(work)).to(dtype)
    assert torch.equal(chosen.direction, expected)


def test_switching_everywhere_is_clipped_sgd():
    net_a, x, lengths, y = make_problem()
    net_b, *_ = make_problem()
    simplex = SimplexSGD(net_a.parameters(), lr=0.1, clip_threshold=0.5, switch_threshold=0.0, generator=0)
    clipped = ClippedSGD(net_b.parameters(), lr=0.1, clip_threshold=0.5)
    for _ in range(3):
        simplex.zero_grad()
        simplex.step(temporal_of(net_a, x, lengths, y))
        clipped.zero_grad()
        F.cross_entropy(net_b(x, lengths), y).backward()
        clipped.step()
    for a, b in zip(net_a.parameters(), net_b.parameters()):
        close(a.detach(), b.detach())
    assert simplex.branch_counts["switched"] == 3
    assert simplex.last_step["cosine"] == -1.0


def test_bare_step_raises_a_clear_error():
    net, *_ = make_problem()
    opt = SimplexSGD(net.parameters())
    with pytest.raises(TypeError, match=r"temporal_gradients\(net, states, loss, lengths\).*ClippedSGD"):
        opt.step()
    with pytest.raises(TypeError, match="got Tensor"):
        opt.step(lambda: torch.tensor(1.0))


def test_closure_returning_temporal_gradients():
    net, x, lengths, y = make_problem()
    opt = SimplexSGD(net.parameters(), generator=0)

    def closure():
        opt.zero_grad()
        return temporal_of(net, x, lengths, y)

    loss = opt.step(closure)
    assert loss.ndim == 0 and sum(opt.branch_counts.values()) == 1


def test_parameters_must_match_the_temporal_gradients():
    net, x, lengths, y = make_problem()
    opt = SimplexSGD([net.recurrent_weight])
    with pytest.raises(ValueError, match="must be the same"):
        opt.step(temporal_of(net, x, lengths, y))


def test_parameter_groups_with_their_own_rates():
    net, x, lengths, y = make_problem()
    readout = list(net.readout.parameters())
    others = [p for p in net.parameters() if p.requires_grad and all(p is not r for r in readout)]
    opt = SimplexSGD([{"params": others}, {"params": readout, "lr": 1e-12}], lr=0.1, generator=0)
    before = {id(p): p.detach().clone() for p in net.parameters()}
    opt.step(temporal_of(net, x, lengths, y))
    for p in readout:
        close(p.detach(), before[id(p)], atol=1e-10)
    for p in others:
        assert (p.detach() - before[id(p)]).abs().max() > 1e-6


def test_last_step_reports_every_groups_step_size():
    """With several groups last_step['step_size'] was the last group's alone; it is one
    value per group now (a float still for one group)."""
    net, x, lengths, y = make_problem()
    readout = list(net.readout.parameters())
    others = [p for p in net.parameters() if p.requires_grad and all(p is not r for r in readout)]
    opt = SimplexSGD([{"params": others, "lr": 0.1}, {"params": readout, "lr": 0.001, "clip_threshold": None}],
                     clip_threshold=1e-3, generator=0)
    tg = temporal_of(net, x, lengths, y)
    opt.step(tg)
    norm = tg.gradient_norm
    assert norm > 1e-3
    assert opt.last_step["step_size"] == [pytest.approx(0.1 * 1e-3 / norm), 0.001]
    single = SimplexSGD(net.parameters(), lr=0.1, clip_threshold=None, generator=0)
    single.step(temporal_of(net, x, lengths, y))
    assert single.last_step["step_size"] == 0.1
    states = net.forward_states(x, lengths)  # a skipped step: NaN for every group
    opt.step(temporal_gradients(net, states, states.outputs.sum() * math.nan, lengths))
    assert opt.last_step["branch"] == "skipped" and all(math.isnan(size) for size in opt.last_step["step_size"])


def test_non_finite_gradient_skips_the_step():
    net, x, lengths, y = make_problem()
    before = [p.detach().clone() for p in net.parameters()]
    opt = SimplexSGD(net.parameters(), generator=0)
    states = net.forward_states(x, lengths)
    loss = states.outputs.sum() * torch.tensor(math.nan, dtype=torch.float64)
    opt.step(temporal_gradients(net, states, loss, lengths))
    assert opt.branch_counts["skipped"] == 1 and opt.last_step["branch"] == "skipped"
    for b, p in zip(before, net.parameters()):
        assert torch.equal(b, p.detach())


def test_a_finite_gradient_whose_squares_overflow_takes_the_clipped_step():
    """Float32 squares of entries above about 1.8e19 overflow, and a finite gradient's
    norm came out infinite: the step was skipped, in the exploding-gradient case the
    clipped step of eq. 3.6 is meant for. Its length is now lr * tau; a gradient with
    an infinity or a NaN is still skipped."""
    w = torch.nn.Parameter(torch.zeros(2))
    opt = ClippedSGD([w], lr=0.1, clip_threshold=1.0)
    w.grad = t([1e20, 1e20])
    opt.step()
    assert opt.skipped_steps == 0
    close(w.detach(), [-0.1 / math.sqrt(2)] * 2, atol=1e-8)
    for bad in ([math.inf, 1e20], [math.nan, 1.0]):
        w.grad = t(bad)
        opt.step()
        assert choose_direction([t(bad)], [t([1.0, 1.0])]).branch == "skipped"
    assert opt.skipped_steps == 2
    d = choose_direction([t([3e20, 4e20])], [t([0.0, 1.0])])
    assert d.branch == "simplex" and d.gradient_norm == pytest.approx(5e20)
    assert d.cosine == pytest.approx(-0.8)
    close(d.direction[0] / 1e20, [0.0, -5.0], atol=1e-6)
    # SimplexSGD, on temporal gradients whose step norms overflow too.
    net = RecurrentNetwork(3, 6, 2, generator=torch.Generator().manual_seed(0))
    x = torch.randn(4, 5, 3, generator=torch.Generator().manual_seed(1))
    lengths = torch.tensor([5, 3, 4, 5])
    before = torch.cat([p.detach().flatten() for p in net.parameters()])
    opt = SimplexSGD(net.parameters(), lr=0.1, clip_threshold=1.0, generator=0)
    states = net.forward_states(x, lengths)
    tg = temporal_gradients(net, states, states.outputs.square().mean() * 1e25, lengths)
    assert all(bool(torch.isfinite(g).all()) for g in tg.gradient) and math.isfinite(tg.gradient_norm)
    opt.step(tg)
    assert opt.last_step["branch"] in ("simplex", "descent_fallback") and -1 <= opt.last_step["cosine"] < 0
    step = torch.cat([p.detach().flatten() for p in net.parameters()]) - before
    assert float(step.norm()) == pytest.approx(0.1, rel=1e-5)


def test_seeded_generator_reproduces_and_state_dict_resumes():
    def train(opt_state=None, steps=4):
        net, x, lengths, y = make_problem()
        opt = SimplexSGD(net.parameters(), lr=0.1, generator=5)
        if opt_state is not None:
            opt.load_state_dict(opt_state)
        for _ in range(steps):
            opt.zero_grad()
            opt.step(temporal_of(net, x, lengths, y))
        return net, opt

    state = torch.random.get_rng_state()
    first, opt = train()
    assert torch.equal(state, torch.random.get_rng_state())  # no global randomness
    second, _ = train()
    for a, b in zip(first.parameters(), second.parameters()):
        assert torch.equal(a, b)
    # Resume: a fresh optimizer loaded from a state dict continues the same draws.
    net, x, lengths, y = make_problem()
    opt_a = SimplexSGD(net.parameters(), lr=0.1, generator=5)
    opt_a.step(temporal_of(net, x, lengths, y))
    saved = pickle.loads(pickle.dumps(opt_a.state_dict()))
    expected = convex_weights(9, generator=opt_a.generator)
    opt_b = SimplexSGD(net.parameters(), lr=0.1, generator=123)
    opt_b.load_state_dict(saved)
    close(convex_weights(9, generator=opt_b.generator), expected)
    assert opt_b.branch_counts == opt_a.branch_counts


def test_load_state_dict_keeps_the_generator_and_its_stream():
    """PyTorch's load_state_dict goes through __setstate__, which made a fresh generator
    with torch's default seed: the user's generator was detached, and a state dict
    without the 'simplex' entry reset every optimizer to the same stream."""
    params = [torch.nn.Parameter(torch.zeros(2))]
    generator = torch.Generator().manual_seed(123)
    opt = SimplexSGD(params, generator=generator)
    opt.load_state_dict(opt.state_dict())
    assert opt.generator is generator
    draws = []
    for seed in (1, 2):
        opt = SimplexSGD(params, generator=seed)
        opt.load_state_dict(torch.optim.Optimizer.state_dict(opt))  # no 'simplex' entry
        draws.append(convex_weights(5, generator=opt.generator))
    close(draws[0], convex_weights(5, generator=torch.Generator().manual_seed(1)))
    close(draws[1], convex_weights(5, generator=torch.Generator().manual_seed(2)))
    # Unpickling still makes a generator, in the pickled one's state.
    copied = pickle.loads(pickle.dumps(opt))
    assert copied.generator is not opt.generator
    close(convex_weights(5, generator=copied.generator), convex_weights(5, generator=opt.generator))


def test_constructor_validation():
    params = [torch.nn.Parameter(torch.zeros(1))]
    for kwargs, message in [
        ({"lr": 0.0}, "lr must be positive"),
        ({"clip_threshold": -1.0}, "clip_threshold must be positive or None"),
        ({"switch_threshold": -0.5}, "switch_threshold must be a non-negative"),
        ({"weights": "gaussian"}, "weights must be one of"),
        ({"eps": -1.0}, "eps must be non-negative"),
    ]:
        with pytest.raises(ValueError, match=message):
            SimplexSGD(params, **kwargs)
    with pytest.raises(TypeError, match="generator must be a torch.Generator, an int seed or None"):
        SimplexSGD(params, generator="seed")
    assert set(SimplexSGD(params).branch_counts) == set(BRANCHES)


def test_constructor_validation_names_what_was_expected_and_what_came():
    """numpy integer seeds and 0-d tensor thresholds were refused with wrong messages,
    a string switch_threshold gave a bare TypeError from '>=', and True passed as 1.0."""
    params = [torch.nn.Parameter(torch.zeros(1))]
    seeded = SimplexSGD(params, generator=np.int64(3))
    close(convex_weights(4, generator=seeded.generator), convex_weights(4, generator=torch.Generator().manual_seed(3)))
    for optimizer in (ClippedSGD, SimplexSGD):
        assert optimizer(params, clip_threshold=torch.tensor(0.5)).param_groups[0]["clip_threshold"] == 0.5
        with pytest.raises(ValueError, match=r"clip_threshold must be positive or None \(never clip\); got "
                                             r"tensor\(0\.\) \(a tensor of shape \(\) and dtype torch\.float32\)"):
            optimizer(params, clip_threshold=torch.tensor(0.0))
        with pytest.raises(ValueError, match=r"lr must be positive; got '0\.1' \(of type str\)\. Pass"):
            optimizer(params, lr="0.1")
        with pytest.raises(ValueError, match=r"clip_threshold must be positive or None.*got True \(of type bool\)"):
            optimizer(params, clip_threshold=True)
    for kwargs, message in [
        ({"switch_threshold": "0.9"}, r"switch_threshold must be a non-negative float or None \(never switch\); "
                                      r"got '0\.9' \(of type str\)\. Pass psi as a float"),
        ({"switch_threshold": True}, r"switch_threshold must be .*; got True \(of type bool\)"),
        ({"switch_threshold": math.nan}, r"switch_threshold must be .*; got nan\. Pass"),
        ({"eps": "1e-8"}, r"eps must be non-negative; got '1e-8' \(of type str\)\. Pass"),
        ({"eps": False}, r"eps must be non-negative; got False \(of type bool\)"),
    ]:
        with pytest.raises(ValueError, match=message):
            SimplexSGD(params, **kwargs)
    assert SimplexSGD(params, switch_threshold=0, eps=0).switch_threshold == 0
    assert SimplexSGD(params, switch_threshold=np.float32(0.9)).switch_threshold == np.float32(0.9)


# ----------------------------------------------------------------------------- training


def temporal_order(n, gen, low=8, high=12):
    """Temporal order (thesis appendix B) on variable lengths: classify the order of X/Y.

    Six one-hot symbols (X, Y, a, b, c, d); X or Y at one position in [0, L/10) and one
    in [L/10, L/2); the rest random distractors; 4 classes xx, xy, yx, yy.
    """
    lengths = torch.randint(low, high + 1, (n,), generator=gen)
    steps = int(lengths.max())
    symbols = torch.randint(2, 6, (n, steps), generator=gen)
    first = (torch.rand(n, generator=gen) * lengths * 0.1).long()
    second = (lengths * 0.1 + torch.rand(n, generator=gen) * lengths * 0.4).long()
    which = torch.randint(0, 2, (n, 2), generator=gen)
    rows = torch.arange(n)
    symbols[rows, first], symbols[rows, second] = which[:, 0], which[:, 1]
    x = F.one_hot(symbols, 6).float()  # (n, T, 6)
    x[torch.arange(steps)[None, :] >= lengths[:, None]] = 0.0
    return x, lengths, which[:, 0] * 2 + which[:, 1]


def test_simplex_sgd_solves_temporal_order_in_plain_pytorch():
    gen = torch.Generator().manual_seed(0)
    net = RecurrentNetwork(6, 24, 4, generator=torch.Generator().manual_seed(1))
    opt = SimplexSGD(net.parameters(), lr=0.1, clip_threshold=1.0, generator=0)
    x_val, lengths_val, y_val = temporal_order(1000, torch.Generator().manual_seed(99))

    def accuracy():
        with torch.no_grad():
            return (net(x_val, lengths_val).argmax(1) == y_val).float().mean().item()

    assert accuracy() < 0.4  # chance is 0.25: the task is not solved at initialization
    for _ in range(700):
        x, lengths, y = temporal_order(50, gen)
        opt.zero_grad()
        states = net.forward_states(x, lengths)
        opt.step(temporal_gradients(net, states, F.cross_entropy(states.outputs, y), lengths))
    assert accuracy() > 0.9
    assert opt.branch_counts["simplex"] > 600  # the simplex direction did the work


def test_the_direction_takes_its_norms_block_by_block():
    # The rule runs batched over models on flat rows; a single model's norms must still be
    # the norm of its blocks' norms, as before the batching, so that its fits (and the
    # thesis experiments) repeat to the digit. A flat norm rounds differently.
    generator = torch.Generator().manual_seed(1)  # blocks whose flat norm rounds otherwise
    temporal = [torch.randn(7, 50, 6, generator=generator), torch.randn(7, 50, 50, generator=generator),
                torch.randn(7, 50, generator=generator), torch.randn(7, 4, 50, generator=generator)]
    gradient = [block.sum(0) for block in temporal]
    by_blocks = float(torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in gradient])))
    flat = float(torch.linalg.vector_norm(torch.cat([g.reshape(-1) for g in gradient])))
    assert flat != by_blocks  # the check below can tell the two apart
    direction = simplex_direction(temporal, gradient, generator=torch.Generator().manual_seed(1))
    assert direction.gradient_norm == by_blocks
    if direction.branch == "simplex":  # the direction has the gradient's norm (eq. 3.5)
        assert math.isclose(float(torch.linalg.vector_norm(torch.cat([d.reshape(-1) for d in direction.direction]))),
                            by_blocks, rel_tol=1e-5)


def test_the_step_size_is_a_float_for_a_tensor_learning_rate_or_threshold():
    # A 0-d tensor lr (accepted by the settings' check) made last_step['step_size'] a
    # tensor, which the docs call a float (a log record of it failed json.dumps).
    import json

    for lr, threshold in ((torch.tensor(0.1), 1.0), (0.1, torch.tensor(0.01))):
        net, x, lengths, y = make_problem()
        opt = SimplexSGD(net.parameters(), lr=lr, clip_threshold=threshold, generator=0)
        states = net.forward_states(x, lengths)
        opt.step(temporal_gradients(net, states, F.cross_entropy(states.outputs, y), lengths))
        assert type(opt.last_step["step_size"]) is float
        json.dumps(opt.last_step["step_size"])


def test_the_cpu_draws_of_the_weights_ignore_the_default_device():
    # convex_weights draws "on the CPU in float64", but its draws followed PyTorch's
    # default device: under torch.set_default_device(...) SimplexSGD.step failed for a
    # network on the CPU ("Cannot copy out of meta tensor"), and under a CUDA default a
    # CPU generator is refused.
    from sklearn_rnn.optim import WEIGHT_RULES

    for rule in WEIGHT_RULES:
        expected = convex_weights(5, rule, generator=torch.Generator().manual_seed(0))
        with torch.device("meta"):
            got = convex_weights(5, rule, generator=torch.Generator().manual_seed(0))
        assert got.device.type == "cpu"
        torch.testing.assert_close(got, expected, rtol=0, atol=0)
    x, lengths, y = torch.randn(3, 5, 2), torch.tensor([5, 3, 2]), torch.randn(3, 1)
    results = []
    for default in (None, "meta"):
        net = RecurrentNetwork(2, 4, 1, generator=torch.Generator().manual_seed(0))
        opt = SimplexSGD(net.parameters(), lr=0.1, generator=0)
        states = net.forward_states(x, lengths)
        tg = temporal_gradients(net, states, F.mse_loss(states.outputs, y), lengths)
        torch.set_default_device(default)
        try:
            opt.step(tg)
        finally:
            torch.set_default_device(None)
        assert opt.last_step["branch"] in ("simplex", "descent_fallback")  # the weights were drawn
        results.append([p.detach().clone() for p in net.parameters()])
    for got, expected in zip(results[1], results[0]):
        torch.testing.assert_close(got, expected, rtol=0, atol=0)


@pytest.mark.parametrize("steps", [0, -2, 2.5, True])
def test_convex_weights_refuse_a_count_that_is_not_a_positive_int(steps):
    # 2.5 reached torch.rand, whose TypeError listed its signatures.
    with pytest.raises(ValueError, match=rf"steps must be an int of at least 1.*got {steps!r} of type"):
        convex_weights(steps, generator=torch.Generator().manual_seed(0))


def test_simplex_direction_refuses_a_gradient_that_is_not_the_temporal_gradients_blocks():
    temporal = [torch.randn(4, 3, 2), torch.randn(4, 3)]
    generator = torch.Generator().manual_seed(0)
    summed = simplex_direction(temporal, [block.sum(0) for block in temporal], generator=generator)
    assert [tuple(block.shape) for block in summed.direction] == [(3, 2), (3,)]
    for gradient, got in [([torch.randn(3)], r"\[\(3,\)\]"), ([torch.randn(3, 2), torch.randn(4)], r"\[\(3, 2\), \(4,\)\]")]:
        # Before: torch's size-mismatch RuntimeError from inside the rule.
        with pytest.raises(ValueError, match=rf"expected shapes \[\(3, 2\), \(3,\)\]; got {got}"):
            simplex_direction(temporal, gradient, generator=generator)


def test_choose_direction_refuses_a_combination_shaped_otherwise_than_the_gradient():
    gradient = [torch.tensor([3.0, 4.0]), torch.ones(2, 2)]
    assert choose_direction(gradient, [torch.tensor([0.0, 1.0]), torch.ones(2, 2)]).branch == "simplex"
    # Before: one block count checked, the shapes not; torch's size error from the rule.
    with pytest.raises(ValueError, match=r"expected shapes \[\(2,\), \(2, 2\)\]; got \[\(2,\), \(4,\)\]"):
        choose_direction(gradient, [torch.tensor([0.0, 1.0]), torch.ones(4)])
    with pytest.raises(ValueError, match=r"got \[\(2,\)\]"):
        choose_direction(gradient, [torch.tensor([0.0, 1.0])])


def test_a_state_dict_carries_the_directions_settings_into_a_fresh_optimizer():
    # Before: switch_threshold, weights and eps stayed the fresh optimizer's own, so a run
    # resumed from a checkpoint silently stopped switching (optim40 review).
    net = RecurrentNetwork(2, 4, 1, generator=torch.Generator().manual_seed(0))
    x, lengths, y = torch.randn(3, 5, 2), torch.tensor([5, 3, 1]), torch.randn(3, 1)

    def batch():
        states = net.forward_states(x, lengths)
        return temporal_gradients(net, states, F.mse_loss(states.outputs, y), lengths, accumulate_grad=False)

    opt = SimplexSGD(net.parameters(), lr=0.1, switch_threshold=0.0, weights="dirichlet", eps=0.5, generator=0)
    opt.step(batch())
    fresh = SimplexSGD(net.parameters(), lr=0.1, generator=1)
    fresh.load_state_dict(opt.state_dict())
    assert (fresh.switch_threshold, fresh.weights, fresh.eps) == (0.0, "dirichlet", 0.5)
    fresh.step(batch())
    assert fresh.last_step["branch"] == "switched"
    state = opt.state_dict()
    state["simplex"]["weights"] = "gaussian"
    with pytest.raises(ValueError, match="weights must be one of"):
        fresh.load_state_dict(state)
    assert fresh.weights == "dirichlet"  # nothing changed by the refused state
    del state["simplex"]["weights"], state["simplex"]["eps"], state["simplex"]["switch_threshold"]
    older = SimplexSGD(net.parameters(), lr=0.1, generator=1)
    older.load_state_dict(state)  # a state saved before they were kept: the optimizer's own
    assert (older.switch_threshold, older.weights, older.eps) == (None, "exp", 1e-8)


@pytest.mark.parametrize("optimizer", [SimplexSGD, ClippedSGD])
def test_an_infinite_step_length_is_refused(optimizer):
    # Accepted before: one step made every weight infinite (optim40 review, item 4).
    w = torch.nn.Parameter(torch.ones(2))
    with pytest.raises(ValueError, match="lr must be finite; got inf"):
        optimizer([w], lr=math.inf)
    opt = optimizer([w], lr=0.1)
    with pytest.raises(ValueError, match="lr must be finite"):
        opt.add_param_group({"params": [torch.nn.Parameter(torch.ones(1))], "lr": torch.tensor(math.inf)})
    assert len(opt.param_groups) == 1
    assert optimizer([w], lr=0.1, clip_threshold=math.inf).param_groups[0]["clip_threshold"] == math.inf


@pytest.mark.parametrize("call, message", [
    # A negative tau stepped along +grad (ascent), a NaN one wrote NaN into the weights,
    # a negative mu climbed the loss; the optimizers refused them, the functions did not.
    (lambda: clipped_step_size(5.0, 0.1, -1.0), "clip_threshold must be positive or None"),
    (lambda: clipped_step_size(5.0, 0.1, math.nan), "clip_threshold must be positive or None"),
    (lambda: clipped_step_size(0.5, -0.1, 1.0), "lr must be positive"),
    (lambda: clipped_step_size(0.5, math.inf, 1.0), "lr must be finite"),
    (lambda: clipped_step_([torch.zeros(2)], [torch.tensor([-3.0, -4.0])], lr=0.1, clip_threshold=-1.0),
     "clip_threshold must be positive or None"),
    # psi -1 always switched, NaN never did; a NaN eps never normalized.
    (lambda: simplex_direction([torch.ones(2, 2)], switch_threshold=-1.0), "switch_threshold must be a non-negative"),
    (lambda: simplex_direction([torch.ones(2, 2)], eps=math.nan), "eps must be non-negative"),
    (lambda: simplex_direction([torch.ones(2, 2)], weights="gauss"), "weights must be one of"),
    (lambda: choose_direction([torch.ones(2)], [torch.ones(2)], switch_threshold=math.nan),
     "switch_threshold must be a non-negative"),
    (lambda: normalization_factors(torch.ones(3), eps=-1.0), "eps must be non-negative"),
    (lambda: normalization_factors(torch.ones(2, 3), eps=torch.tensor([[1e-8], [math.nan]])),
     "eps must be non-negative for every model"),
    (lambda: normalize_temporal_gradients([torch.ones(2, 2)], eps=math.nan), "eps must be non-negative"),
])
def test_the_functional_rules_refuse_the_settings_the_optimizers_refuse(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_the_functional_step_rule_keeps_its_documented_limits():
    w = torch.zeros(2)
    assert clipped_step_([w], [torch.tensor([-3.0, -4.0])], lr=0.1, clip_threshold=None) == 0.1
    torch.testing.assert_close(w, torch.tensor([-0.3, -0.4]))
    assert clipped_step_size(5.0, 0.1, math.inf) == 0.1  # an infinite tau never clips
    factors = normalization_factors(torch.tensor([[2.0, 1e-9], [2.0, 1e-9]]), eps=torch.tensor([[1e-8], [0.0]]))
    torch.testing.assert_close(factors, torch.tensor([[0.5, 1.0], [0.5, 1e9]]))


def test_clipped_sgd_takes_sparse_gradients_as_their_dense_equivalent():
    # An embedding with sparse=True before the recurrence failed inside the norm
    # (linalg_vector_norm has no sparse kernel), where torch.optim.SGD steps.
    torch.manual_seed(0)
    sparse, dense = torch.nn.Embedding(10, 3, sparse=True), torch.nn.Embedding(10, 3)
    dense.load_state_dict(sparse.state_dict())
    before = dense.weight.detach().clone()
    index = torch.tensor([1, 2, 2, 7])  # a repeated row: uncoalesced entries
    for module in (sparse, dense):
        optimizer = ClippedSGD(module.parameters(), lr=0.1, clip_threshold=0.5)
        module(index).square().sum().backward()
        optimizer.step()
    assert sparse.weight.grad.is_sparse
    torch.testing.assert_close(sparse.weight, dense.weight)
    assert not torch.equal(dense.weight, before)  # a step was taken


@pytest.mark.parametrize("call, error, message", [
    # An int seed reached torch.rand's signature listing; an empty gradient torch.cat's.
    (lambda: convex_weights(3, generator=0), TypeError, "generator must be a CPU torch.Generator"),
    (lambda: simplex_direction([torch.ones(2, 2)], generator=0), TypeError, "generator must be a CPU torch.Generator"),
    (lambda: choose_direction([], []), ValueError, "gradient must hold one block per parameter"),
])
def test_the_functional_entry_points_name_what_they_expected(call, error, message):
    with pytest.raises(error, match=message):
        call()


@pytest.mark.parametrize("optimizer", ["clipped", "simplex"])
@pytest.mark.parametrize(("key", "bad", "match"), [
    ("lr", -1.0, "lr must be a non-negative number (a schedule may set 0); got -1.0"),
    ("lr", float("nan"), "lr must be a non-negative number (a schedule may set 0); got nan"),
    ("lr", float("inf"), "lr must be finite; got inf"),
    ("clip_threshold", -1.0, "clip_threshold must be positive or None"),
])
def test_a_loaded_state_s_step_settings_are_checked_as_the_constructor_s(optimizer, key, bad, match):
    # load_state_dict took them without a word: a negative rate climbed the loss (0.70 to
    # 4.25 in 20 steps), NaN wrote NaN weights.
    from sklearn_rnn.optim import ClippedSGD

    parameter = torch.nn.Parameter(torch.tensor([1.0, 2.0]))
    make = (lambda: ClippedSGD([parameter], lr=0.1)) if optimizer == "clipped" else (
        lambda: SimplexSGD([parameter], lr=0.1, generator=0))
    state = make().state_dict()
    state["param_groups"][0][key] = bad
    loaded = make()
    with pytest.raises(ValueError, match=rf"^state_dict's param_groups\[0\]: {re.escape(match)}"):
        loaded.load_state_dict(state)
    assert loaded.param_groups[0]["lr"] == 0.1 and loaded.param_groups[0]["clip_threshold"] == 1.0
    with pytest.raises(ValueError, match=r"has no clip_threshold: it is not the state of a (ClippedSGD|SimplexSGD) "
                                         r"\(another optimizer's, such as torch\.optim\.SGD's\?\)"):
        loaded.load_state_dict(torch.optim.SGD([parameter], lr=0.1).state_dict())  # KeyError at the next step


def test_clipped_step_refuses_what_would_spoil_the_weights_or_lift_the_clip():
    # NaN or inf in d was written into theta; a (1,) block broadcast onto a (2,) parameter
    # took a step longer than mu * tau; a negative direction_norm turned clipping off.
    for values in ([float("nan"), 1.0], [float("inf"), 0.0], [1.5e308, 1.5e308]):
        weights = torch.zeros(2, dtype=torch.float64)
        with pytest.raises(ValueError, match=r"the direction's norm is (nan|inf).*nothing was changed"):
            clipped_step_([weights], [torch.tensor(values, dtype=torch.float64)], lr=0.1, clip_threshold=1.0)
        assert weights.tolist() == [0.0, 0.0]
    weights = torch.zeros(2)
    with pytest.raises(ValueError, match=r"^direction block 0 has shape \(1,\), but its parameter \(2,\)"):
        clipped_step_([weights], [torch.tensor([10.0])], lr=0.1, clip_threshold=1.0)
    with pytest.raises(ValueError, match=r"^direction_norm must be a non-negative number.*got -5\.0"):
        clipped_step_([weights], [torch.tensor([3.0, 4.0])], lr=0.1, clip_threshold=1.0, direction_norm=-5.0)
    assert clipped_step_([weights], [torch.tensor([3.0, 4.0])], lr=0.1, clip_threshold=1.0, direction_norm=5.0) == 0.02


def test_an_lr_beyond_the_parameters_dtype_is_refused_before_any_step():
    # lr=1e300 on float32 passed the constructor; the step failed in add_ after the
    # first group had moved and the branch was counted.
    from sklearn_rnn.optim import ClippedSGD

    parameters = [torch.nn.Parameter(torch.zeros(2)) for _ in range(2)]
    match = r"^lr=1e\+300 is beyond the range of the parameters' dtype torch\.float32 \(at most 3\.4e\+38\)"
    with pytest.raises(ValueError, match=match):
        SimplexSGD([{"params": parameters[:1]}, {"params": parameters[1:], "lr": 1e300}], lr=0.1, generator=0)
    with pytest.raises(ValueError, match=match):
        ClippedSGD(parameters, lr=1e300)
    ClippedSGD([torch.nn.Parameter(torch.zeros(2, dtype=torch.float64))], lr=1e300)  # within float64


def test_a_module_with_parametrized_weights_is_refused_by_the_adapter():
    # Accepted: the temporal gradients covered the computed weight, the real parameter got
    # no gradient, and SimplexSGD then told the user to do what they had done.
    from torch.nn.utils.parametrizations import orthogonal

    from sklearn_rnn.optim import RecurrentAdapter

    rnn = torch.nn.RNN(2, 4, batch_first=True)
    orthogonal(rnn, "weight_hh_l0")
    with pytest.raises(ValueError, match=r"^rnn has parametrized weights \(weight_hh_l0, .*remove_parametrizations"):
        RecurrentAdapter(rnn, torch.nn.Linear(4, 1))


def test_the_optimizers_own_messages_for_an_int_input_dtype_seed_and_a_spent_graph():
    import torch.nn.functional as functional

    from sklearn_rnn.optim import RecurrentAdapter

    net = RecurrentAdapter(torch.nn.GRU(2, 4, batch_first=True), torch.nn.Linear(4, 1))
    with pytest.raises(ValueError, match=r"x has dtype torch\.int64 .*x\.to\(torch\.float32\)\.$"):
        net.forward_states(torch.randint(0, 3, (3, 5, 2)), torch.tensor([5, 3, 1]))  # was: the adapter .to(int64)
    with pytest.raises(ValueError, match=r"dtype must be a floating-point torch\.dtype"):
        convex_weights(3, dtype=torch.int64, generator=torch.Generator().manual_seed(0))  # zeros came back
    with pytest.raises(ValueError, match=r"generator, an int seed, must be in \[-2\*\*63, 2\*\*64\)"):
        SimplexSGD(net.parameters(), generator=2**70)
    x, lengths, y = torch.randn(3, 5, 2), torch.tensor([5, 3, 1]), torch.randn(3, 1)
    states = net.forward_states(x, lengths)
    loss = functional.mse_loss(states.outputs, y)
    loss.backward()  # kept from a plain PyTorch loop
    with pytest.raises(RuntimeError, match=r"already used by a backward pass.*temporal_gradients replaces "
                                           r"loss\.backward\(\)"):
        temporal_gradients(net, states, loss, lengths)


@pytest.mark.parametrize("optimizer", ["clipped", "simplex"])
def test_a_state_whose_schedule_set_lr_to_zero_loads(optimizer):
    # optim44: a LambdaLR warm-up from 0 (or a decay to 0) made the optimizer's own state
    # unloadable ("lr must be positive; got 0.0"), and the estimators' rollback after a
    # Ctrl-C in a warm-up epoch raised that instead of the KeyboardInterrupt.
    from torch.optim.lr_scheduler import LambdaLR

    from sklearn_rnn.optim import ClippedSGD

    parameter = torch.nn.Parameter(torch.tensor([1.0, 2.0]))
    make = (lambda: ClippedSGD([parameter], lr=0.1)) if optimizer == "clipped" else (
        lambda: SimplexSGD([parameter], lr=0.1, generator=0))
    warming = make()
    LambdaLR(warming, lambda epoch: epoch / 10)
    assert warming.param_groups[0]["lr"] == 0.0
    loaded = make()
    loaded.load_state_dict(warming.state_dict())
    assert loaded.param_groups[0]["lr"] == 0.0


def test_simplex_state_entries_are_checked_before_anything_loads_and_numpy_settings_stay_loadable():
    # optim44: a bad branch_counts (or a generator state moved off the CPU by map_location)
    # failed after the groups had loaded, leaving the checkpoint's lr beside the
    # optimizer's own settings; numpy settings made torch.load(weights_only=True) refuse the state.
    import io

    parameter = torch.nn.Parameter(torch.tensor([1.0, 2.0]))
    saved = SimplexSGD([parameter], lr=0.5, switch_threshold=np.float64(0.9), eps=np.float64(1e-8), generator=0)
    state = saved.state_dict()
    state["simplex"] = {**state["simplex"], "branch_counts": {"simplx": 3}}
    target = SimplexSGD([parameter], lr=0.01, generator=1)
    with pytest.raises(ValueError, match=r"simplex branch_counts must count steps of the branches"):
        target.load_state_dict(state)
    assert target.param_groups[0]["lr"] == 0.01 and target.switch_threshold is None
    buffer = io.BytesIO()
    torch.save(saved.state_dict(), buffer)
    buffer.seek(0)
    target.load_state_dict(torch.load(buffer))  # weights_only=True, the default
    assert target.switch_threshold == 0.9 and type(target.switch_threshold) is float
    state = saved.state_dict()
    state["simplex"] = {**state["simplex"], "generator_state": state["simplex"]["generator_state"].to(torch.int64)}
    target.load_state_dict(state)  # a state cast on the way is read as bytes
    assert torch.equal(target.generator.get_state(), saved.generator.get_state())


def test_plain_pytorch_spellings_of_groups_closures_norms_and_lengths_are_taken_or_refused_by_name():
    # optim44: lr past the dtype's range was checked for a list of parameters but not for
    # module.parameters(); step(closure=...) was a TypeError; clipped_step_size took a
    # negative norm and returned mu; lengths=None was told to pass [None]; integer blocks
    # gave a truncated direction.
    from sklearn_rnn.nn._lengths import as_lengths
    from sklearn_rnn.optim import clipped_step_size, simplex_direction

    net = torch.nn.Linear(2, 1)
    with pytest.raises(ValueError, match=r"lr=1e\+39 is beyond the range of the parameters' dtype torch.float32"):
        SimplexSGD([{"params": net.parameters(), "lr": 1e39}], lr=0.01, generator=0)
    model = RecurrentNetwork(2, 3, 1, generator=torch.Generator().manual_seed(0))
    optimizer = SimplexSGD(model.parameters(), lr=0.01, generator=0)
    x, lengths = torch.randn(2, 4, 2), torch.tensor([4, 2])

    def closure():
        optimizer.zero_grad()
        states = model.forward_states(x, lengths)
        return temporal_gradients(model, states, states.outputs.square().mean(), lengths)

    assert optimizer.step(closure=closure) is not None
    with pytest.raises(ValueError, match=r"direction_norm must be a non-negative number .* got -5.0"):
        clipped_step_size(-5.0, 0.1, 1.0)
    assert clipped_step_size(float("inf"), 0.1, 1.0) == 0.1  # as documented: a non-finite norm gets mu
    with pytest.raises(ValueError, match=r"got None\. For sequences without padding, pass each one's steps"):
        as_lengths(None)
    with pytest.raises(ValueError, match=r"got \[None\], which holds other things"):
        as_lengths([None])
    with pytest.raises(ValueError, match=r"temporal-gradient blocks must be floating point"):
        simplex_direction([torch.tensor([[1, 2], [3, 4]])])


def test_an_interrupt_in_a_warm_up_epoch_from_lr_zero_is_rolled_back_as_an_interrupt():
    # optim44: the rollback's load of the optimizer state (lr 0 under a LambdaLR warm-up)
    # raised "lr must be positive" instead of the documented KeyboardInterrupt.
    from skorch.callbacks import Callback, LRScheduler
    from torch.optim.lr_scheduler import LambdaLR

    from sklearn_rnn import RNNRegressor

    class CtrlC(Callback):
        def on_batch_end(self, net, training=False, **kwargs):
            if training:
                raise KeyboardInterrupt

    rng = np.random.default_rng(0)
    X = [rng.normal(size=(int(rng.integers(3, 8)), 2)) for _ in range(20)]
    y = np.array([x[0, 0] for x in X])
    model = RNNRegressor(optimizer="sgd", max_iter=3, batch_size=8, random_state=0, callbacks=[
        ("warmup", LRScheduler(policy=LambdaLR, lr_lambda=lambda epoch: epoch / 5)), ("ctrlc", CtrlC())])
    with pytest.raises(KeyboardInterrupt, match="interrupted before its first epoch finished"):
        model.fit(X, y)
    assert not hasattr(model, "net_")


def test_the_optimizers_refuse_what_they_cannot_step_and_load_whole_states_only(tmp_path):
    # optim45 1-6: a tensor tied into two layers got a SimplexSGD step of its last block
    # only; prune/weight_norm/spectral_norm weights (computed by hooks) got no gradient; a
    # complex gradient whose squares overflow went unclipped (the rescue dropped its
    # imaginary part); a generator state of another size failed after the groups had
    # loaded; a saved lr beyond float32 loaded and failed mid-step; numpy-string weights
    # made a state_dict that torch.load refuses.
    from torch import nn
    from torch.nn.utils import prune

    from sklearn_rnn.optim import ClippedSGD, RecurrentAdapter, SimplexSGD, temporal_gradients

    rnn = nn.RNN(4, 4, num_layers=2, batch_first=True)
    rnn.weight_hh_l1 = rnn.weight_hh_l0
    net = RecurrentAdapter(rnn, nn.Linear(4, 1))
    x, lengths = torch.randn(3, 5, 4), torch.tensor([5, 3, 2])
    states = net.forward_states(x, lengths)
    with pytest.raises(ValueError, match=r"one tensor plays two parts in the network, W_rec and W_rec\[1\]"):
        temporal_gradients(net, states, states.outputs.pow(2).mean(), lengths)
    for reparametrize in (lambda m: prune.l1_unstructured(m, "weight_hh_l0", 0.5),
                          lambda m: torch.nn.utils.weight_norm(m, "weight_hh_l0")):
        module = nn.RNN(4, 4, batch_first=True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)  # weight_norm's deprecation
            reparametrize(module)
        with pytest.raises(ValueError, match=r"rnn has weights computed by a hook .*weight_hh_l0"):
            RecurrentAdapter(module, nn.Linear(4, 1))
    for gradient in ([1e20j, 1e20j], [3e19j, 4e19j]):
        p = nn.Parameter(torch.zeros(2, dtype=torch.complex64))
        p.grad = torch.tensor(gradient, dtype=torch.complex64)
        ClippedSGD([p], lr=0.1, clip_threshold=1.0).step()
        assert float(torch.linalg.vector_norm(p.detach())) == pytest.approx(0.1, rel=1e-5)
    model = nn.Linear(2, 1)
    optimizer = SimplexSGD(model.parameters(), lr=0.01, generator=0, weights=np.array(["dirichlet"])[0])
    state = optimizer.state_dict()
    torch.save(state, tmp_path / "state.pt")
    assert torch.load(tmp_path / "state.pt")["simplex"]["weights"] == "dirichlet"  # weights_only: plain str
    bad = {**state, "simplex": {**state["simplex"], "generator_state": torch.zeros(16, dtype=torch.uint8)}}
    with pytest.raises(ValueError, match=r"generator_state is not a CPU generator's state \(16 bytes"):
        optimizer.load_state_dict(bad)
    far = {**state, "param_groups": [{**group, "lr": 1e39} for group in state["param_groups"]]}
    with pytest.raises(ValueError, match=r"param_groups\[0\]: lr=1e\+39 is beyond the range"):
        optimizer.load_state_dict(far)
    assert optimizer.param_groups[0]["lr"] == 0.01
