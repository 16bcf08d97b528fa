"""Initialization of recurrent weight matrices (thesis algorithm 3.1)."""

from __future__ import annotations

import math
import sys
from numbers import Real

import torch

__all__ = ["spectral_radius_"]


def _check_radius(value: object, name: str) -> None:
    """Refuse a spectral radius that is not a finite positive number, naming the
    parameter ``name`` that held it."""
    if isinstance(value, bool) or not isinstance(value, Real) or not 0 < value < math.inf:
        raise ValueError(
            f"{name} must be a finite positive number (the largest eigenvalue modulus of the "
            f"recurrent matrices); got {value!r}."
        )


#: The smallest ``std`` of :func:`spectral_radius_`: the square root of float64's smallest
#: normal number, below which the draw's squares underflow.
_SMALLEST_STD = math.sqrt(sys.float_info.min)


def spectral_radius_(
    weight: torch.Tensor,
    rho: float,
    *,
    std: float = 0.1,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Fill a square matrix with a Gaussian draw rescaled to spectral radius ``rho``.

    Algorithm 3.1 of the thesis: draw ``W ~ N(0, std^2)`` and rescale it so that the
    largest modulus of its eigenvalues equals ``rho``. A radius slightly above one keeps
    the temporal gradients of distant steps from vanishing at initialization (the
    Jacobian products through ``tanh`` shrink them, the radius pulls them back), which
    is what lets clipped gradient descent learn dependencies over long spans.

    Parameters
    ----------
    weight : torch.Tensor of shape (n, n)
        The matrix to fill in place. A stacked matrix of shape ``(k * n, n)`` (the
        gate blocks of a GRU or LSTM) is filled block by block, each block with radius
        ``rho``.
    rho : float
        The target spectral radius, strictly positive.
    std : float, default=0.1
        Standard deviation of the Gaussian draw before rescaling, finite and positive.
        The draw is rescaled to spectral radius ``rho``, so ``std`` does not change the
        result (up to rounding); it is kept as algorithm 3.1 states it.
    generator : torch.Generator, optional
        The source of randomness; the global generator when None.

    Returns
    -------
    torch.Tensor
        ``weight``, modified in place.

    Examples
    --------
    >>> import torch
    >>> from sklearn_rnn.nn import spectral_radius_
    >>> w = torch.empty(50, 50)
    >>> _ = spectral_radius_(w, 1.2, generator=torch.Generator().manual_seed(0))
    >>> round(torch.linalg.eigvals(w).abs().max().item(), 4)
    1.2
    """
    if weight.ndim != 2 or 0 in weight.shape or weight.shape[0] % weight.shape[1] != 0:
        raise ValueError(
            "spectral_radius_ expects a square matrix (n, n) or a stack of square blocks "
            f"(k * n, n), n >= 1; got a tensor of shape {tuple(weight.shape)}."
        )
    _check_radius(rho, "rho")
    # Below the square root of float64's smallest normal number the draw's squares, which
    # the eigenvalue solver forms, underflow (a radius of 0 or NaN; MKL complains).
    if isinstance(std, bool) or not isinstance(std, Real) or not _SMALLEST_STD <= std < math.inf:
        raise ValueError(
            f"std must be a finite number of at least {_SMALLEST_STD:.1e} (the Gaussian draw's "
            f"standard deviation, which the rescaling to rho cancels); got {std!r}. Leave the "
            "default, 0.1."
        )
    if not weight.is_floating_point():  # an int64 matrix took the rescaled draw truncated
        raise ValueError(f"spectral_radius_ fills a floating-point matrix; got one of {weight.dtype}.")
    n = weight.shape[1]
    blocks = []
    for _ in range(weight.shape[0] // n):
        # Draw on the CPU in float64 so that the result does not depend on the device.
        draw = torch.randn(n, n, generator=generator, dtype=torch.float64, device="cpu") * std
        exact = draw * (rho / torch.linalg.eigvals(draw).abs().max())
        scaled = exact.to(weight.dtype)
        # Checked for every block before any is written: a refusal leaves weight as it was.
        if not bool(torch.isfinite(scaled).all()):  # rho=1e39 in float32: inf weights
            raise ValueError(
                f"rho={rho!r} gives weights past the range of {weight.dtype} (largest "
                f"{float(exact.abs().max()):.3g}); choose a radius near 1, or a wider dtype."
            )
        # rho=1e-46 in float32: a matrix of zeros; 1e-45: 34 of 36 entries zero, the
        # radius 40% off. Below the normal range the entries lose their precision.
        if float(exact.abs().max()) < torch.finfo(weight.dtype).tiny:
            raise ValueError(
                f"rho={rho!r} gives weights below the normal range of {weight.dtype} (largest "
                f"{float(exact.abs().max()):.3g}, smallest normal {torch.finfo(weight.dtype).tiny:.3g}), "
                "which lose their precision; choose a radius near 1, or a wider dtype."
            )
        blocks.append(scaled)
    with torch.no_grad():
        for block, scaled in zip(weight.split(n, dim=0), blocks):
            block.copy_(scaled)
    return weight
