"""The LSTM cell: PyTorch's equations, gate order ``i, f, g, o``.

``[i, f, g, o] = [s, s, tanh, s](u_t + W_hh h_{t-1})``, ``c_t = f c_{t-1} + i g``,
``h_t = o tanh(c_t)``, with ``u_t`` holding every gate's input part. Every gate reads
``h_{t-1}`` through ``W_hh`` alone, so the temporal gradient of ``W_hh`` at step ``t``
is ``delta_t h_{t-1}^T``, as for the Elman cells. :class:`torch.nn.LSTM` is the fused
kernel; :class:`_LSTM` the step-by-step recurrence with its hand-written backward pass;
:meth:`LSTMCell.step` one step in plain tensor operations, for the stacked trainer.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from ._base import FusedCell, register_cell
from ._stepwise import ONE, TWO, Record, chunks, differentiable_once, shifted, tanh_

__all__ = ["FORGET_BIAS", "LSTMCell"]

#: Initial forget-gate bias of the LSTM (Gers, Schmidhuber and Cummins, 2000;
#: Jozefowicz, Zaremba and Sutskever, 2015): the cell keeps its memory at first.
FORGET_BIAS: float = 1.0

#: Scale of the LSTM's gate blocks in the order i, f, o, g: the g block doubled.
_G_DOUBLED = torch.tensor([1.0, 1.0, 1.0, 2.0])[:, None, None]


class LSTMCell(FusedCell):
    """PyTorch's LSTM: four gate blocks, a cell state ``c`` beside ``h``.

    With a spectral radius, the forget gate's bias starts at :data:`FORGET_BIAS`
    (see :meth:`reset_parameters`).

    Examples
    --------
    >>> from sklearn_rnn.nn import get_cell
    >>> lstm = get_cell("lstm")
    >>> lstm.gates, lstm.state_count, lstm.default_spectral_radius
    (4, 2, None)
    """

    name = "lstm"
    gates = 4
    state_count = 2
    default_spectral_radius = None
    torch_mode = "LSTM"
    module = nn.LSTM
    kernel = torch.lstm
    stackable = True

    def reset_parameters(
        self,
        projection: nn.Linear,
        recurrence: nn.Module,
        *,
        spectral_radius: float | None,
        generator: torch.Generator | None,
    ) -> None:
        """:meth:`FusedCell.reset_parameters`, and with a radius the forget gate's bias at :data:`FORGET_BIAS`.

        Parameters
        ----------
        projection : torch.nn.Linear
        recurrence : torch.nn.LSTM
        spectral_radius : float or None
        generator : torch.Generator or None

        Examples
        --------
        >>> import torch
        >>> from sklearn_rnn.nn import get_cell
        >>> lstm = get_cell("lstm")
        >>> projection, recurrence = torch.nn.Linear(2, 12), lstm.make_recurrence(3)
        >>> lstm.reset_parameters(projection, recurrence, spectral_radius=1.2,
        ...                       generator=torch.Generator().manual_seed(0))
        >>> projection.bias.detach()[3:6]  # the forget gate
        tensor([1., 1., 1.])
        """
        super().reset_parameters(projection, recurrence, spectral_radius=spectral_radius, generator=generator)
        if spectral_radius is not None:
            hidden_size = recurrence.hidden_size
            with torch.no_grad():
                projection.bias[hidden_size : 2 * hidden_size] = FORGET_BIAS

    def stepwise(  # noqa: D102
        self,
        u: torch.Tensor,
        weight: torch.Tensor,
        bias: torch.Tensor | None,
        h0: torch.Tensor | None,
        c0: torch.Tensor | None,
        record: Record,
    ) -> torch.Tensor:
        return _LSTM.apply(u, weight, h0, c0, record)

    def step(  # noqa: D102
        self,
        u: torch.Tensor,
        state: tuple[torch.Tensor, ...],
        weight: torch.Tensor,
        bias: torch.Tensor | None,
    ) -> tuple[torch.Tensor, ...]:
        h, c = state
        i, f, g, o = (u + h @ weight.T).chunk(4, dim=-1)  # PyTorch's gate order
        c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
        return torch.sigmoid(o) * torch.tanh(c), c


class _LSTM(torch.autograd.Function):
    """PyTorch's LSTM over ``u``; keeps the gates, the cell states and ``tanh(c_t)``.

    The forward stores the gates in the order ``i, f, o, g`` (the three sigmoids side by
    side: one call per step); the deltas are written in PyTorch's ``i, f, g, o``.
    """

    @staticmethod
    def forward(
        ctx: Any,
        u: torch.Tensor,
        weight: torch.Tensor,
        h0: torch.Tensor | None,
        c0: torch.Tensor | None,
        record: Record,
    ) -> torch.Tensor:
        with torch.autocast(u.device.type, enabled=False):
            batch, steps, width = u.shape
            hidden = width // 4
            # u_t in time-major memory, gate blocks reordered to i, f, o, g and the g block
            # doubled: one sigmoid per step then gives i, f, o and s = sigmoid(2 a_g),
            # with g = tanh(a_g) = 2 s - 1 (see _tanh_). Computed in place of u_t.
            gates = u.new_empty(steps, batch, 4, hidden)
            blocks = u.transpose(0, 1).reshape(steps, batch, 4, hidden)
            gates[:, :, :2].copy_(blocks[:, :, :2])
            gates[:, :, 2].copy_(blocks[:, :, 3])
            torch.mul(blocks[:, :, 2], 2, out=gates[:, :, 3])
            gates = gates.view(steps, batch, width)
            weight_t = (weight.reshape(4, hidden, hidden)[[0, 1, 3, 2]] * _G_DOUBLED.to(weight)).reshape(width, hidden).T
            cells = u.new_empty(steps, batch, hidden)
            squashed = torch.empty_like(cells)  # tanh(c_t)
            states = torch.empty_like(cells)
            h = u.new_zeros(batch, hidden) if h0 is None else h0
            c = u.new_zeros(batch, hidden) if c0 is None else c0
            blocks_t = gates.view(steps, batch, 4, hidden).unbind(2)  # i, f, o, s: (T, B, H) each
            # Every step's views made at once (one call each, not several indexings per step).
            per_step = zip(gates.unbind(0), *(block.unbind(0) for block in blocks_t),
                           cells.unbind(0), squashed.unbind(0), states.unbind(0))
            for act, i_t, f_t, o_t, s_t, cell, squash, state in per_step:
                act.addmm_(h, weight_t).sigmoid_()  # (B, 4H): i, f, o, s
                torch.mul(f_t, c, out=cell)
                c = cell.addcmul_(i_t, s_t, value=2).sub_(i_t)  # f c + i (2s - 1)
                h = torch.mul(tanh_(c, out=squash), o_t, out=state)
            blocks_t[3].mul_(TWO).sub_(ONE)  # s to g
        ctx.save_for_backward(gates, cells, squashed, weight, c0)
        ctx.cell = record.cell
        record.states, record.first = states, h0
        return states.transpose(0, 1)  # (B, T, H)

    @staticmethod
    @differentiable_once
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        gates, cells, squashed, weight, c0 = ctx.saved_tensors
        sigmoid_backward, tanh_backward = torch.ops.aten.sigmoid_backward, torch.ops.aten.tanh_backward
        with torch.autocast(gates.device.type, enabled=False):
            grad = grad.transpose(0, 1)  # (T, B, H), a view
            steps, batch, hidden = cells.shape
            delta = torch.empty_like(gates)  # (T, B, 4H), PyTorch's gate order
            dh = grad.new_empty(batch, hidden)  # dL/dh_t
            dc = grad.new_zeros(batch, hidden)  # dL/dc_t
            spread = grad.new_empty(batch, 4 * hidden)  # [dc, dc, dc, dh]
            grads, deltas = grad.unbind(0), delta.unbind(0)
            for lo, hi in chunks(steps):
                i, f, o, g = gates[lo:hi].split(hidden, dim=2)
                tanh_c = squashed[lo:hi]
                # delta_t = [dc, dc, dc, dh] * factor_t: factors of a block of steps at once,
                # written where the deltas go. di = dc g i(1-i), df = dc c_{t-1} f(1-f),
                # dg = dc i (1-g^2), do = dh tanh(c) o(1-o).
                factors = (
                    sigmoid_backward(g, i),
                    sigmoid_backward(shifted(cells, c0, lo, hi), f),
                    tanh_backward(i, g),
                    sigmoid_backward(tanh_c, o),
                )
                torch.cat(factors, dim=2, out=delta[lo:hi])
                to_cell = tanh_backward(o, tanh_c).unbind(0)  # dc_t += dh_t o (1 - tanh(c)^2)
                forget = f.unbind(0)
                for t in range(hi - 1, lo - 1, -1):
                    if t == steps - 1:
                        dh.copy_(grads[t])
                    else:
                        torch.addmm(grads[t], deltas[t + 1], weight, out=dh)
                    dc.addcmul_(dh, to_cell[t - lo])
                    deltas[t].mul_(torch.cat((dc, dc, dc, dh), dim=1, out=spread))
                    dc.mul_(forget[t - lo])  # the part of dL/dc_(t-1) through c_t
            grad_h0 = delta[0] @ weight if ctx.needs_input_grad[2] else None
            grad_c0 = dc if ctx.needs_input_grad[3] else None
        return delta.transpose(0, 1), None, grad_h0, grad_c0, None


register_cell(LSTMCell())
