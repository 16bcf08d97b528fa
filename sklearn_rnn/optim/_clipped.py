"""Gradient clipping as a step rule (thesis eq. 3.6), and the clipped anti-gradient optimizer."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

import torch

__all__ = ["ClippedSGD", "clipped_step_size"]


def clipped_step_size(direction_norm: float, learning_rate: float, clip_threshold: float | None) -> float:
    """Step length of eq. 3.6: ``mu`` if ``||d|| <= tau``, else ``mu * tau / ||d||``.

    A non-finite norm gets ``mu``, as in the original implementation (the caller decides
    what to do with a non-finite direction); ``clip_threshold=None`` never clips.

    Parameters
    ----------
    direction_norm : float
        Euclidean norm of the whole update direction (all parameters together).
    learning_rate : float
        ``mu``.
    clip_threshold : float or None
        ``tau``.

    Returns
    -------
    float

    Examples
    --------
    >>> from sklearn_rnn.optim import clipped_step_size
    >>> clipped_step_size(0.5, 0.01, 1.0), clipped_step_size(4.0, 0.01, 1.0)
    (0.01, 0.0025)
    """
    if clip_threshold is None or not math.isfinite(direction_norm) or direction_norm <= clip_threshold:
        return learning_rate
    return learning_rate * clip_threshold / direction_norm


class ClippedSGD(torch.optim.Optimizer):
    """Anti-gradient steps whose length follows the clipping rule of eq. 3.6.

    ``theta <- theta - alpha * g`` with ``alpha = mu`` when ``||g|| <= tau`` and
    ``mu * tau / ||g||`` otherwise, the norm taken over every parameter of every group
    together (one direction, one step length). A step whose gradient holds a NaN or an
    infinity is skipped and counted in ``skipped_steps``, so that one bad batch cannot
    poison the weights.

    Parameters
    ----------
    params : iterable of torch.Tensor or dict
        Parameters to optimize; those that never receive a gradient are ignored.
    lr : float, default=0.01
        ``mu``.
    clip_threshold : float or None, default=1.0
        ``tau``; None never clips.

    Examples
    --------
    >>> import torch
    >>> from sklearn_rnn.optim import ClippedSGD
    >>> w = torch.nn.Parameter(torch.tensor([3.0, 4.0]))
    >>> opt = ClippedSGD([w], lr=0.1, clip_threshold=1.0)
    >>> w.grad = torch.tensor([3.0, 4.0])  # norm 5 > 1: step 0.1 * 1 / 5
    >>> opt.step()
    >>> w.detach()
    tensor([2.9400, 3.9200])
    """

    def __init__(
        self,
        params: Iterable[torch.Tensor] | Iterable[dict],
        lr: float = 0.01,
        clip_threshold: float | None = 1.0,
    ) -> None:
        if not lr > 0:
            raise ValueError(f"lr must be positive; got {lr!r}.")
        if clip_threshold is not None and not clip_threshold > 0:
            raise ValueError(f"clip_threshold must be positive or None; got {clip_threshold!r}.")
        super().__init__(params, {"lr": lr, "clip_threshold": clip_threshold})
        self.skipped_steps = 0

    def __getstate__(self) -> dict[str, Any]:
        """What pickle, joblib and deepcopy keep: PyTorch's optimizer state and the
        count of skipped steps."""
        state = super().__getstate__()
        state["skipped_steps"] = self.skipped_steps
        return state

    @torch.no_grad()
    def step(self, closure: Callable[[], torch.Tensor] | None = None) -> torch.Tensor | None:  # type: ignore[override]
        """Take one clipped anti-gradient step.

        Parameters
        ----------
        closure : callable, optional
            Re-evaluates the model and returns the loss.

        Returns
        -------
        torch.Tensor or None
            The closure's loss.
        """
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        grads = [p.grad for group in self.param_groups for p in group["params"] if p.grad is not None]
        if not grads:
            return loss
        norm = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in grads]))
        norm_value = float(norm)
        if not math.isfinite(norm_value):
            self.skipped_steps += 1
            return loss
        for group in self.param_groups:
            alpha = clipped_step_size(norm_value, group["lr"], group["clip_threshold"])
            for p in group["params"]:
                if p.grad is not None:
                    p.add_(p.grad, alpha=-alpha)
        return loss
