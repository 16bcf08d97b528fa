"""The clipped anti-gradient optimizer: the step rule of thesis eq. 3.6 on the gradient.

The rule itself (:func:`clipped_step_size`, :func:`clipped_step_`) lives in the
functional core, where :class:`SimplexSGD` takes it too.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

import torch

from ._functional import _check_step_settings, _clipped_update_, _norm, _StepRuleOptimizer

__all__ = ["ClippedSGD"]


class ClippedSGD(_StepRuleOptimizer):
    """Anti-gradient steps whose length follows the clipping rule of eq. 3.6.

    ``theta <- theta - alpha * g`` with ``alpha = mu`` when ``||g|| <= tau`` and
    ``mu * tau / ||g||`` otherwise, the norm taken over every parameter of every group
    together (one direction, one step length). A step whose gradient holds a NaN or an
    infinity is skipped and counted in ``skipped_steps``, so that one bad batch cannot
    poison the weights; a finite gradient is clipped however large (its norm is taken
    without overflowing where the squares of its entries would).

    Parameters
    ----------
    params : iterable of torch.Tensor or dict
        Parameters to optimize; those that never receive a gradient are ignored. A
        sparse gradient (``torch.nn.Embedding(sparse=True)``) counts its values.
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
        _check_step_settings({"lr": lr, "clip_threshold": clip_threshold})
        super().__init__(params, {"lr": lr, "clip_threshold": clip_threshold})
        self.skipped_steps = 0

    def state_dict(self) -> dict[str, Any]:
        """PyTorch's optimizer state, with the count of skipped steps.

        Returns
        -------
        dict
        """
        return {**super().state_dict(), "skipped_steps": self.skipped_steps}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore a state from :meth:`state_dict`, the count of skipped steps included.

        Parameters
        ----------
        state_dict : dict
        """
        state_dict = dict(state_dict)
        skipped = state_dict.pop("skipped_steps", None)
        if skipped is not None and not (isinstance(skipped, int) and not isinstance(skipped, bool) and skipped >= 0):
            raise ValueError(  # before the groups load, which then stay as they were
                f"state_dict's skipped_steps must be a non-negative int; got {skipped!r}. Load a "
                "state saved by ClippedSGD.state_dict()."
            )
        super().load_state_dict(state_dict)
        if skipped is not None:
            self.skipped_steps = skipped

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
        norm = _norm(grads)  # one norm over every group: one direction, one step length
        if not math.isfinite(norm):
            self.skipped_steps += 1
            return loss
        for group in self.param_groups:
            params = [p for p in group["params"] if p.grad is not None]
            grads = [p.grad for p in params]
            _clipped_update_(params, grads, norm, lr=group["lr"], clip_threshold=group["clip_threshold"], sign=-1.0)
        return loss
