"""The Elman cells 'tanh' and 'relu': ``h_t = f(u_t + W_rec h_{t-1})`` (thesis eq. 1.30-1.34).

PyTorch's :class:`torch.nn.RNN` (``nonlinearity='tanh'`` or ``'relu'``) is the fused
kernel; :class:`_Elman` is the step-by-step recurrence with its hand-written backward
pass, whose delta is ``f'(a_t) dL/dh_t``; :meth:`ElmanCell.step` is one step in plain
tensor operations, for the stacked trainer. The recurrent part is not gated, so the
temporal gradient of ``W_rec`` at step ``t`` is ``delta_t h_{t-1}^T``.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from ._base import FusedCell, register_cell
from ._stepwise import Record, differentiable_once, tanh_

__all__ = ["ElmanCell"]


class ElmanCell(FusedCell):
    """The Elman cell ``h_t = f(u_t + W_rec h_{t-1})`` with ``f`` tanh or relu.

    Parameters
    ----------
    name : str
        Its name in the registry.
    nonlinearity : {'tanh', 'relu'}
        ``f``, as :class:`torch.nn.RNN` takes it.

    Examples
    --------
    >>> from sklearn_rnn.nn import get_cell
    >>> relu = get_cell("relu")
    >>> relu.nonlinearity, relu.gates, relu.torch_mode
    ('relu', 1, 'RNN_RELU')
    """

    module = nn.RNN
    stackable = True
    # On a CPU the loop trains faster than the fused kernel for both nonlinearities:
    # one layer's forward and backward pass takes 0.71-0.75 of the kernel's time with
    # tanh and 0.60-0.78 with relu (``benchmarks/bench_recurrence.py``).
    trains_stepwise = True

    def __init__(self, name: str, *, nonlinearity: str) -> None:
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"nonlinearity must be 'tanh' or 'relu' (torch.nn.RNN's); got {nonlinearity!r}.")
        self.name = name
        self.nonlinearity = nonlinearity
        self.torch_mode = f"RNN_{nonlinearity.upper()}"
        self.module_options = {"nonlinearity": nonlinearity}
        self.kernel = torch.rnn_relu if nonlinearity == "relu" else torch.rnn_tanh
        # tanh keeps the state in [-1, 1]; relu lets it grow by W_rec's spectral radius per step.
        self.bounded_state = nonlinearity == "tanh"

    def stepwise(  # noqa: D102
        self,
        u: torch.Tensor,
        weight: torch.Tensor,
        bias: torch.Tensor | None,
        h0: torch.Tensor | None,
        c0: torch.Tensor | None,
        record: Record,
    ) -> torch.Tensor:
        return _Elman.apply(u, weight, h0, self.nonlinearity == "relu", record)

    def step(  # noqa: D102
        self,
        u: torch.Tensor,
        state: tuple[torch.Tensor, ...],
        weight: torch.Tensor,
        bias: torch.Tensor | None,
    ) -> tuple[torch.Tensor, ...]:
        (h,) = state
        a = u + h @ weight.T  # (B, H)
        return (torch.relu(a) if self.nonlinearity == "relu" else torch.tanh(a),)


class _Elman(torch.autograd.Function):
    """``h_t = f(u_t + W h_{t-1})``; the backward's delta is ``f'(a_t) dL/dh_t``.

    With ``record.padded`` (a cell without a bounded state, given lengths), each
    sequence's state stops at its end: ``h_t = 0`` at its padded steps, whose deltas are
    then zero too.
    """

    @staticmethod
    def forward(
        ctx: Any, u: torch.Tensor, weight: torch.Tensor, h0: torch.Tensor | None, relu: bool, record: Record
    ) -> torch.Tensor:
        with torch.autocast(u.device.type, enabled=False):
            batch, steps, hidden = u.shape
            inputs = u.transpose(0, 1)  # (T, B, H), a view
            states = u.new_empty(steps, batch, hidden)
            h = u.new_zeros(batch, hidden) if h0 is None else h0
            weight_t = weight.T
            padded, stop = record.padded, record.stop
            for t, (u_t, state) in enumerate(zip(inputs.unbind(0), states.unbind(0))):  # views made at once
                torch.addmm(u_t, h, weight_t, out=state)
                h = state.relu_() if relu else tanh_(state)
                if padded is not None and t >= stop:  # selected, not multiplied: never 0 * inf
                    h.masked_fill_(padded[t], 0.0)
        ctx.relu, ctx.cell, ctx.padded, ctx.stop = relu, record.cell, padded, stop
        ctx.save_for_backward(states, weight)
        record.states, record.first = states, h0
        return states.transpose(0, 1)  # (B, T, H)

    @staticmethod
    @differentiable_once
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        states, weight = ctx.saved_tensors
        with torch.autocast(states.device.type, enabled=False):
            grad = grad.transpose(0, 1)  # (T, B, H), a view
            steps = states.shape[0]
            delta = torch.empty_like(states)
            total = torch.empty_like(states[0])  # dL/dh_t
            grads, deltas, hs = grad.unbind(0), delta.unbind(0), states.unbind(0)  # views made at once
            for t in range(steps - 1, -1, -1):
                if t == steps - 1:
                    total.copy_(grads[t])
                else:
                    torch.addmm(grads[t], deltas[t + 1], weight, out=total)
                # f'(a_t) from h_t: 1 - h^2, or h > 0
                if ctx.relu:
                    torch.ops.aten.threshold_backward.grad_input(total, hs[t], 0, grad_input=deltas[t])
                else:
                    torch.ops.aten.tanh_backward.grad_input(total, hs[t], grad_input=deltas[t])
                # A stopped state depends on nothing; relu's derivative at its zero already says so.
                if ctx.padded is not None and not ctx.relu and t >= ctx.stop:
                    deltas[t].masked_fill_(ctx.padded[t], 0.0)
            grad_h0 = delta[0] @ weight if ctx.needs_input_grad[2] else None
        return delta.transpose(0, 1), None, grad_h0, None, None


register_cell(ElmanCell("tanh", nonlinearity="tanh"))
register_cell(ElmanCell("relu", nonlinearity="relu"))
