"""The simplex rule in the exploding-gradient regime: float32 squares and products of
finite entries that overflow must not change the direction, nor its branch."""

from __future__ import annotations

import math

import pytest
import torch

from sklearn_rnn.optim import choose_direction
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
