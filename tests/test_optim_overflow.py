"""The simplex rule in the exploding-gradient regime: float32 squares and products of
finite entries that overflow must not change the direction, nor its branch."""

from __future__ import annotations

import math

import pytest
import torch

from sklearn_rnn.nn import RecurrentNetwork
from sklearn_rnn.optim import (
    SimplexSGD,
    _temporal,
    choose_direction,
    normalize_temporal_gradients,
    simplex_direction,
    step_norms,
    temporal_gradients,
)
from sklearn_rnn.optim._functional import _choose_directions

t = torch.tensor


def test_the_descent_check_does_not_depend_on_the_combinations_scale():
    """A combination of mixed signs times a large gradient: its float32 products overflow
    with both signs, and their sum is inf - inf, NaN. Only an infinite product was
    recomputed, so a NaN one failed the descent test and the anti-gradient was taken
    ('descent_fallback', cosine -1), although the direction, rescaled to ||grad||
    whatever the combination's scale, is a descent direction."""
    expected = choose_direction([t([1e30, 1e30])], [t([1.0, -0.5])])
    assert expected.branch == "simplex" and expected.cosine == pytest.approx(-1 / math.sqrt(10))
    for gradient, combination in [([1e30, 1e30], [1e10, -0.5e10]), ([1e20, 1e20], [1e20, -0.5e20])]:
        chosen = choose_direction([t(gradient)], [t(combination)])
        assert chosen.branch == "simplex", (gradient, combination, chosen)
        assert chosen.cosine == pytest.approx(-1 / math.sqrt(10), rel=1e-6)
        unit = chosen.direction[0] / chosen.gradient_norm
        torch.testing.assert_close(unit, t([-2.0, 1.0]) / math.sqrt(5), rtol=1e-6, atol=0)
    # Rows of several models at once: an infinite or NaN entry still gives a
    # non-finite statistic, which skips the step (in the gradient) or falls back (in the
    # combination).
    gradient = t([[1e20, 1e20], [math.nan, 1.0], [1e20, 1e20]])
    combination = t([[1e20, -0.5e20], [1.0, 1.0], [math.inf, -1.0]])
    chosen = _choose_directions(gradient, torch.linalg.vector_norm(gradient, dim=1), combination, [None] * 3)
    assert chosen.branch == ["simplex", "skipped", "descent_fallback"]
    assert chosen.cosine[0] == pytest.approx(-1 / math.sqrt(10), rel=1e-6) and chosen.cosine[2] == -1.0


def scaled_temporal_gradients(scale, *, cell="tanh", dtype=torch.float32):
    """Temporal gradients of one network and batch, their loss multiplied by ``scale``:
    two layers and a learned initial state, on ragged lengths."""
    net = RecurrentNetwork(3, 6, 2, cell=cell, num_layers=2, hidden_init="learned",
                           generator=torch.Generator().manual_seed(0)).to(dtype)
    x = torch.randn(4, 5, 3, generator=torch.Generator().manual_seed(1), dtype=dtype)
    lengths = torch.tensor([5, 3, 4, 5])
    states = net.forward_states(x, lengths)
    loss = states.outputs.square().mean() * scale
    return net, temporal_gradients(net, states, loss, lengths, accumulate_grad=False)


def test_step_norms_whose_squares_overflow_are_recomputed():
    """Float32 squares of finite entries above about 1.8e19 overflow: such a step's norm
    came out infinite, and normalization_factors left it unnormalized (factor 1) like a
    step with an infinite entry, while the other steps were divided by their norms. It
    is now recomputed without overflow; an infinite or NaN entry still gives an infinite
    or NaN norm."""
    w = t([[3e20, 0.0], [3.0, 0.0], [math.inf, 1.0], [math.nan, 1.0]])  # (4 steps, 2)
    b = t([[4e20], [4.0], [1.0], [1.0]])  # (4 steps, 1)
    norms = step_norms([w, b])
    torch.testing.assert_close(norms[:2], t([5e20, 5.0]))
    assert math.isinf(norms[2]) and math.isnan(norms[3])
    unit_w, unit_b = normalize_temporal_gradients([w[:2], b[:2]])
    torch.testing.assert_close(unit_w, t([[0.6, 0.0], [0.6, 0.0]]))
    torch.testing.assert_close(unit_b, t([[0.8], [0.8]]))


@pytest.mark.parametrize("cell", ["tanh", "gru", "lstm"])
@pytest.mark.parametrize("chunked", [False, True])
def test_temporal_gradient_norms_scale_with_the_loss_past_the_squares_range(monkeypatch, cell, chunked):
    """The per-step norms of the loss times 1e25 are 1e25 times those of the loss (the
    squares of their float32 entries overflow), whichever way they are computed, and
    SimplexSGD's direction is that of the unscaled loss, its branch 'simplex'. Before,
    the overflowed steps were left unnormalized: the direction collapsed towards the
    anti-gradient, and with a NaN inner product fell back to it."""
    if chunked:
        monkeypatch.setattr(_temporal, "_CHUNK_ELEMENTS", 4)  # nothing kept: norms by chunks
    _, reference = scaled_temporal_gradients(1.0, cell=cell)
    net, scaled = scaled_temporal_gradients(1e25, cell=cell)
    for method in ("direct", "gram"):
        expected = reference.norms(method) * 1e25
        assert bool(torch.isinf(expected).any()) is False
        torch.testing.assert_close(scaled.norms(method), expected, rtol=1e-5, atol=0)
    torch.testing.assert_close(step_norms(scaled.per_step()), reference.norms() * 1e25, rtol=1e-5, atol=0)
    stacked = _temporal._StackedTemporalGradients(scaled.parameters, scaled._layers, 1, scaled.steps)
    torch.testing.assert_close(stacked.norms()[0], reference.norms() * 1e25, rtol=1e-5, atol=0)
    # The step, from fresh temporal gradients (their norms not computed yet), and the
    # functional rule on the materialized ones.
    steps, cosines = [], []
    for scale in (1.0, 1e25):
        net, tg = scaled_temporal_gradients(scale, cell=cell)
        before = torch.cat([p.detach().flatten() for p in net.parameters()])
        opt = SimplexSGD(net.parameters(), lr=0.1, clip_threshold=1e-3, generator=0)
        opt.step(tg)
        assert opt.last_step["branch"] == "simplex"
        cosines.append(opt.last_step["cosine"])
        steps.append(torch.cat([p.detach().flatten() for p in net.parameters()]) - before)
        chosen = simplex_direction(tg.per_step(), tg.gradient, generator=torch.Generator().manual_seed(0))
        assert chosen.branch == "simplex" and chosen.cosine == pytest.approx(cosines[-1], rel=1e-4)
    assert cosines[1] == pytest.approx(cosines[0], rel=1e-4)
    assert float(torch.nn.functional.cosine_similarity(steps[0], steps[1], dim=0)) == pytest.approx(1.0, abs=1e-5)


def with_an_infinite_delta(temporal):
    """``temporal`` with one delta infinite: the last aligned step of the first layer."""
    delta = temporal._layers[0].delta.clone()
    delta[-1, 0, 0] = math.inf
    layers = (_temporal._Layer(delta, None, temporal._layers[0].blocks), *temporal._layers[1:])
    return _temporal.TemporalGradients(
        parameters=temporal.parameters, names=temporal.names, layers=layers, steps=temporal.steps,
        alignment=temporal.alignment, counts=temporal.counts, loss=temporal.loss,
    )


def test_float64_step_norms_past_the_squares_range_and_infinite_entries():
    """In float64 the squares overflow past about 1.3e154: the norms are recomputed on
    deltas divided by their largest magnitude. An infinite delta keeps its step's norm
    infinite or NaN (and the gradient is skipped), and the other steps' as they were."""
    _, reference = scaled_temporal_gradients(1.0, dtype=torch.float64)
    _, scaled = scaled_temporal_gradients(1e160, dtype=torch.float64)
    torch.testing.assert_close(scaled.norms(), reference.norms() * 1e160, rtol=1e-12, atol=0)
    broken = with_an_infinite_delta(scaled)
    for method in ("direct", "gram"):
        norms = broken.norms(method)
        assert not math.isfinite(norms[-1]), method
        torch.testing.assert_close(norms[:-1], reference.norms()[:-1] * 1e160, rtol=1e-12, atol=0)


@pytest.mark.parametrize("cell", ["tanh", "gru", "lstm"])
@pytest.mark.parametrize("chunked", [False, True])
def test_parameter_norms_scale_with_the_loss_past_the_squares_range(monkeypatch, cell, chunked):
    """Each parameter's per-step norms of the loss times 1e25 are 1e25 times those of the
    loss, as the per-step norms over all parameters are: their float32 squares overflowed
    and the norms came out infinite. They are recomputed as norms() recomputes its own,
    and still add up, squared, to those norms; an infinite entry keeps its step's norms
    infinite, the other steps' as they were."""
    if chunked:
        monkeypatch.setattr(_temporal, "_CHUNK_ELEMENTS", 4)  # nothing kept: norms by chunks
    _, reference = scaled_temporal_gradients(1.0, cell=cell)
    _, scaled = scaled_temporal_gradients(1e25, cell=cell)
    expected = reference.parameter_norms()
    norms = scaled.parameter_norms()
    assert list(norms) == list(expected) == list(scaled.names)
    for name, value in norms.items():
        assert value.dtype == torch.float32 and bool(torch.isfinite(value).all()), name
        torch.testing.assert_close(value, expected[name] * 1e25, rtol=1e-5, atol=0, msg=name)
    together = torch.stack([value.double() / 1e25 for value in norms.values()]).square().sum(0).sqrt()
    torch.testing.assert_close(together.float(), reference.norms(), rtol=1e-5, atol=0)
    broken = with_an_infinite_delta(scaled).parameter_norms()
    for block in scaled._layers[0].blocks:
        name = scaled.names[block.index]
        assert not math.isfinite(broken[name][-1]), name
        torch.testing.assert_close(broken[name][:-1], expected[name][:-1] * 1e25, rtol=1e-5, atol=0, msg=name)
