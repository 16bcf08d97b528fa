"""The GRU cell: PyTorch's equations, gate order ``r, z, n``, written once.

With ``u_t`` holding every gate's input part and ``q_t = W_hh h_{t-1} + b_hh``:
``r, z = s(u_rz + q_rz)``, ``n = tanh(u_n + r q_n)``, ``h_t = n + z (h_{t-1} - n)``.
The candidate reads ``tanh(u_n + r_t * (W_hn h_{t-1} + b_hn))``, PyTorch's (and cuDNN's)
form, rather than ``W_hn (r_t * h_{t-1})`` of Cho et al. (2014) and the lecture deck:
the reset gate then scales a recurrent product that the fused kernels compute anyway.

Temporal gradients: the reset and update gates read ``u + W_h h_{t-1} + b_h``, but the
candidate's recurrent part is gated, so ``[W_hn | b_hn]|t = (delta_n,t * r_t)
[h_{t-1}; 1]^T`` (:meth:`GRUCell.gate_recurrent_delta`), with ``r_t`` as the CPU's
step-by-step recurrence kept it, or, after a fused kernel (on a GPU), recomputed for
all steps at once from the stored ``u`` and ``h_{t-1}`` (:meth:`GRUCell.reset_gates`:
one batched product, no loop over steps). ``b_hr`` and ``b_hz`` add to ``u`` exactly as
``b`` does: their temporal gradients equal those of ``b``'s first two blocks. The
candidate block ``b_hn`` cannot merge into ``b``, so the GRU keeps ``b_hh`` of its own
(:attr:`~sklearn_rnn.nn.cells.Cell.has_recurrent_bias`) with a frozen zero ``b_ih``.

:meth:`GRUCell.step` is one step of the same equations in plain tensor operations, which
the stacked trainer vectorizes over models.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from ._base import FusedCell, LayerStates, register_cell
from ._stepwise import Record, chunks, differentiable_once, shifted, tanh_of_doubled_

__all__ = ["GRUCell"]


class GRUCell(FusedCell):
    """PyTorch's GRU: three gate blocks, a recurrent bias, a reset-gated candidate.

    Examples
    --------
    >>> from sklearn_rnn.nn import get_cell
    >>> gru = get_cell("gru")
    >>> gru.gates, gru.has_recurrent_bias, gru.torch_mode
    (3, True, 'GRU')
    """

    name = "gru"
    gates = 3
    default_spectral_radius = None
    torch_mode = "GRU"
    has_recurrent_bias = True
    module = nn.GRU
    kernel = torch.gru
    stackable = True
    trains_stepwise = True

    def stepwise(  # noqa: D102
        self,
        u: torch.Tensor,
        weight: torch.Tensor,
        bias: torch.Tensor | None,
        h0: torch.Tensor | None,
        c0: torch.Tensor | None,
        record: Record,
    ) -> torch.Tensor:
        return _GRU.apply(u, weight, bias, h0, record)

    def step(  # noqa: D102
        self,
        u: torch.Tensor,
        state: tuple[torch.Tensor, ...],
        weight: torch.Tensor,
        bias: torch.Tensor | None,
    ) -> tuple[torch.Tensor, ...]:
        (h,) = state
        hidden = h.shape[-1]
        q = h @ weight.T + bias  # (B, 3H): W_hh h_{t-1} + b_hh
        gates = torch.sigmoid(u[..., : 2 * hidden] + q[..., : 2 * hidden])  # r, z
        r, z = gates[..., :hidden], gates[..., hidden:]
        n = torch.tanh(u[..., 2 * hidden :] + r * q[..., 2 * hidden :])
        return (n + z * (h - n),)

    def gate_recurrent_delta(self, delta: torch.Tensor, resets: torch.Tensor | None) -> torch.Tensor:
        """``delta`` with its candidate block scaled by the reset gate: ``[d_r, d_z, d_n * r]``.

        Parameters
        ----------
        delta : torch.Tensor of shape (steps, batch, 3 * hidden)
            ``dL/du``, time-major.
        resets : torch.Tensor of shape (steps, batch, hidden)
            ``r_t`` of every step.

        Returns
        -------
        torch.Tensor of shape (steps, batch, 3 * hidden)

        Examples
        --------
        >>> import torch
        >>> from sklearn_rnn.nn import get_cell
        >>> get_cell("gru").gate_recurrent_delta(torch.ones(1, 1, 6), torch.full((1, 1, 2), 0.5))[0, 0]
        tensor([1.0000, 1.0000, 1.0000, 1.0000, 0.5000, 0.5000])
        """
        assert resets is not None  # the GRU's recurrence always records them
        hidden = resets.shape[2]
        candidate = delta[..., 2 * hidden :] * resets  # (T, B, H)
        return torch.cat([delta[..., : 2 * hidden], candidate], dim=2)  # (T, B, 3H)

    def reset_gates(
        self, projected: torch.Tensor, previous: torch.Tensor, weight_hh: torch.Tensor, bias_hh: torch.Tensor | None
    ) -> torch.Tensor:
        """``r_t = s(u_r + W_hr h_{t-1} + b_hr)`` for all steps at once, ``(steps, batch, hidden)``.

        Parameters
        ----------
        projected : torch.Tensor of shape (steps, batch, 3 * hidden)
            ``u``, time-major.
        previous : torch.Tensor of shape (steps, batch, hidden)
            ``h_{t-1}``.
        weight_hh : torch.Tensor of shape (3 * hidden, hidden)
        bias_hh : torch.Tensor of shape (3 * hidden,) or None

        Returns
        -------
        torch.Tensor of shape (steps, batch, hidden)
        """
        hidden = previous.shape[2]
        w_hr = weight_hh[:hidden]  # (H, H)
        b_hr = bias_hh[:hidden] if bias_hh is not None else 0.0
        return torch.sigmoid(projected[..., :hidden] + previous @ w_hr.T + b_hr)  # (T, B, H)

    def recurrent_deltas(
        self,
        delta: torch.Tensor,
        states: LayerStates,
        previous: torch.Tensor,
        weight_hh: torch.Tensor,
        bias_hh: torch.Tensor | None,
    ) -> torch.Tensor:
        """The delta of ``W_hh h_{t-1} + b_hh``: :meth:`gate_recurrent_delta` of ``delta``.

        ``r_t`` comes from ``states.resets`` (kept by the CPU's recurrence), or is
        recomputed by :meth:`reset_gates` (after the fused kernels).

        Parameters
        ----------
        delta : torch.Tensor of shape (steps, batch, 3 * hidden)
            ``dL/du``, time-major, in the parameters' dtype.
        states : LayerStates
        previous : torch.Tensor of shape (steps, batch, hidden)
        weight_hh : torch.Tensor of shape (3 * hidden, hidden)
        bias_hh : torch.Tensor of shape (3 * hidden,) or None

        Returns
        -------
        torch.Tensor of shape (steps, batch, 3 * hidden)
        """
        dtype = weight_hh.dtype
        if states.resets is not None:
            reset = states.resets.to(dtype)  # kept by the CPU's recurrence
        else:
            projected = states.projected.detach().to(dtype).transpose(0, 1)  # (T, B, 3H)
            reset = self.reset_gates(
                projected, previous, weight_hh.detach(), None if bias_hh is None else bias_hh.detach()
            )
        # Padded steps may hold non-finite values; their delta is zero and stays zero.
        return self.gate_recurrent_delta(delta, torch.nan_to_num(reset, nan=0.0))

    def project_module_inputs(  # noqa: D102
        self,
        z: torch.Tensor,
        weight_ih: torch.Tensor,
        bias_ih: torch.Tensor | None,
        weight_hh: torch.Tensor,
        bias_hh: torch.Tensor | None,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        projected = nn.functional.linear(z, weight_ih, bias_ih)  # (B, T, 3H)
        if bias_hh is None:
            bias_hh = weight_hh.new_zeros(weight_hh.shape[0])  # (3H,)
        return projected, bias_hh


class _GRU(torch.autograd.Function):
    """PyTorch's GRU over ``u``; keeps ``r, z``, ``n`` and the candidate's ``q_n = W_hn h + b_hn``."""

    @staticmethod
    def forward(
        ctx: Any,
        u: torch.Tensor,
        weight: torch.Tensor,
        bias: torch.Tensor,
        h0: torch.Tensor | None,
        record: Record,
    ) -> torch.Tensor:
        with torch.autocast(u.device.type, enabled=False):
            batch, steps, width = u.shape
            hidden = width // 3
            inputs = u.transpose(0, 1)  # (T, B, 3H), a view
            resets = u.new_empty(steps, batch, 2 * hidden)  # r, z
            candidates = u.new_empty(steps, batch, hidden)  # n
            recurrent = u.new_empty(steps, batch, width)  # q_t = W h_{t-1} + b_hh
            states = torch.empty_like(candidates)
            h = u.new_zeros(batch, hidden) if h0 is None else h0
            weight_t = weight.T
            rz, n = slice(0, 2 * hidden), slice(2 * hidden, width)
            # The candidate's pre-activation is computed doubled, 2 (u_n + r q_n), for
            # tanh(a) = 2 sigmoid(2 a) - 1 (see tanh_) without a product per step; doubling
            # is exact in floating point, so the values are those of tanh_.
            doubled = torch.mul(inputs[:, :, n], 2)  # 2 u_n, (T, B, H)
            # Every step's views made at once (one call each, not several indexings per
            # step: at 20-30 steps the indexing cost as much as the arithmetic).
            per_step = zip(
                inputs[:, :, rz].unbind(0), doubled.unbind(0), recurrent.unbind(0),
                recurrent[:, :, rz].unbind(0), recurrent[:, :, n].unbind(0), resets.unbind(0),
                resets[:, :, :hidden].unbind(0), resets[:, :, hidden:].unbind(0),
                candidates.unbind(0), states.unbind(0),
            )
            for u_rz, u_n2, q, q_rz, q_n, gate, r, z, candidate, state in per_step:
                torch.addmm(bias, h, weight_t, out=q)
                torch.add(u_rz, q_rz, out=gate).sigmoid_()
                torch.addcmul(u_n2, r, q_n, value=2, out=candidate)  # 2 (u_n + r q_n)
                n_t = tanh_of_doubled_(candidate)  # tanh(u_n + r q_n)
                h = torch.lerp(n_t, h, z, out=state)  # n + z (h - n)
            candidate_recurrent = recurrent[:, :, n]  # q_n, a view
        ctx.save_for_backward(resets, candidates, candidate_recurrent, states, weight, h0)
        ctx.cell = record.cell
        record.states, record.first, record.resets = states, h0, resets[:, :, :hidden]
        return states.transpose(0, 1)  # (B, T, H)

    @staticmethod
    @differentiable_once
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        resets, candidates, candidate_recurrent, states, weight, h0 = ctx.saved_tensors
        sigmoid_backward, tanh_backward = torch.ops.aten.sigmoid_backward, torch.ops.aten.tanh_backward
        with torch.autocast(resets.device.type, enabled=False):
            grad = grad.transpose(0, 1)  # (T, B, H), a view
            steps, batch, hidden = states.shape
            delta = grad.new_empty(steps, batch, 3 * hidden)  # dL/du
            through = grad.new_empty(2, batch, 3 * hidden)  # dL/dq of steps t and t + 1
            dh = grad.new_empty(batch, hidden)  # dL/dh_t
            spread = grad.new_empty(batch, 3 * hidden)  # [dh, dh, dh]
            grads, deltas, throughs = grad.unbind(0), delta.unbind(0), through.unbind(0)
            updates = resets[:, :, hidden:].unbind(0)  # z_t
            for lo, hi in chunks(steps):
                r, z = resets[lo:hi].split(hidden, dim=2)
                n = candidates[lo:hi]
                # With dh = dL/dh_t: da_n = dh (1-z)(1-n^2), da_z = dh (h_{t-1} - n) z(1-z),
                # da_r = da_n q_n r(1-r); the recurrent part of the candidate gets da_n r.
                to_n = tanh_backward(1 - z, n)
                to_r = sigmoid_backward(candidate_recurrent[lo:hi], r).mul_(to_n)
                to_z = sigmoid_backward(shifted(states, h0, lo, hi) - n, z)
                torch.cat((to_r, to_z, to_n), dim=2, out=delta[lo:hi])  # factors, then deltas
                to_through = torch.cat((to_r, to_z, to_n.mul_(r)), dim=2).unbind(0)
                for t in range(hi - 1, lo - 1, -1):
                    if t == steps - 1:
                        dh.copy_(grads[t])
                    else:
                        # dL/dh_t = grad_t + z_{t+1} dL/dh_{t+1} + W^T dL/dq_{t+1}
                        dh.mul_(updates[t + 1]).add_(grads[t]).addmm_(throughs[(t + 1) % 2], weight)
                    torch.cat((dh, dh, dh), dim=1, out=spread)
                    deltas[t].mul_(spread)
                    torch.mul(spread, to_through[t - lo], out=throughs[t % 2])
            grad_h0 = None
            if ctx.needs_input_grad[3]:
                grad_h0 = torch.addmm(dh * resets[0, :, hidden:], through[0], weight)
        return delta.transpose(0, 1), None, None, grad_h0, None


register_cell(GRUCell())
