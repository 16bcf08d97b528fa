"""A step-by-step recurrence whose input projection is a leaf: the CPU path of temporal gradients.

Temporal gradients need ``delta_t = dL/du_t``, the delta of every gate pre-activation at
every step (:mod:`sklearn_rnn.optim`). The fused PyTorch kernels only give it when
``u`` is fed through input weights frozen to the identity
(:func:`~sklearn_rnn.nn._cells.identity_forward`), which multiplies by a
``(G * H, G * H)`` identity at every step, forward and backward (and, on the CPU's
oneDNN kernel, also computes the identity's own unused gradient). For the GRU
(``G = 3``) and the LSTM (``G = 4``) those products cost several times the recurrence
itself.

:func:`stepwise_recurrence` runs the same cell as an explicit loop over steps, in a
:class:`torch.autograd.Function` with a hand-written backward pass: the forward keeps
the gate activations, the backward walks the steps in reverse and writes each step's
gate deltas straight into the gradient of ``u``, so no identity product exists at all.
Elementwise derivative factors that do not depend on the incoming gradient are
computed for all steps at once, leaving a handful of small operations per step (one
``(B, H) x (H, G * H)`` product each way). On a CPU this costs about what the fused
kernel costs without the identity (see ``docs/performance.rst``); on a GPU the
per-step launches would dominate, and the fused cuDNN kernel, which batches the
identity product over all steps, is used instead.

The recurrent weights get their gradient from a separate node between the projection
and the recurrence (``_RecurrentWeights``): a backward pass that asks only for the
gradient of ``u``, as :func:`~sklearn_rnn.optim.temporal_gradients` does, stops there
and never pays for ``sum_t delta_t h_(t-1)^T``, which the temporal gradients compute
step by step anyway; a full ``backward()`` still fills ``W_hh.grad``.

Equations (PyTorch's, gate order ``i, f, g, o`` and ``r, z, n``), with ``u_t`` holding
every gate's input part and ``W = W_hh``:

* Elman: ``h_t = f(u_t + W h_{t-1})``, ``f`` tanh or relu;
* LSTM: ``[i, f, g, o] = [s, s, tanh, s](u_t + W h_{t-1})``,
  ``c_t = f c_{t-1} + i g``, ``h_t = o tanh(c_t)``;
* GRU: ``q_t = W h_{t-1} + b_hh``, ``r, z = s(u_rz + q_rz)``,
  ``n = tanh(u_n + r q_n)``, ``h_t = n + z (h_{t-1} - n)``.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.autograd.function import once_differentiable

__all__ = ["stepwise_recurrence"]

#: Cells that :func:`stepwise_recurrence` runs.
STEPWISE_CELLS: tuple[str, ...] = ("tanh", "relu", "gru", "lstm")


def stepwise_recurrence(
    cell: str,
    projected: torch.Tensor,
    weight_hh: torch.Tensor,
    bias_hh: torch.Tensor | None,
    initial: tuple[torch.Tensor, ...],
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """Run a cell over ``u = projected``, step by step, with a hand-written backward pass.

    The gradient of the returned ``u`` is exactly the delta of every gate pre-activation
    at every step, as with the identity-input fused kernel, without its identity
    products. Computed in the dtype of ``weight_hh``, with autocast off.

    Parameters
    ----------
    cell : {'tanh', 'relu', 'gru', 'lstm'}
        The cell.
    projected : torch.Tensor of shape (batch, steps, gates * hidden)
        ``u_t = W_in z_t + b``, every gate's input part.
    weight_hh : torch.Tensor of shape (gates * hidden, hidden)
        The stacked recurrent matrices.
    bias_hh : torch.Tensor of shape (gates * hidden,) or None
        The GRU's recurrent bias (the candidate's ``b_hn`` sits inside the reset gate);
        None for the other cells.
    initial : tuple of torch.Tensor of shape (batch, hidden)
        ``(h_0,)``, or ``(h_0, c_0)`` for the LSTM; ``()`` for zero.

    Returns
    -------
    u : torch.Tensor of shape (batch, steps, gates * hidden)
        ``projected`` (in the dtype of ``weight_hh``) as the recurrence read it: ask
        autograd for its gradient to get the deltas.
    hidden : torch.Tensor of shape (batch, steps, hidden)
        The states ``h_t`` (a batch-first view of time-major memory, as the fused
        kernels return them).
    resets : torch.Tensor of shape (steps, batch, hidden) or None
        For the GRU, the reset gate ``r_t`` of every step as the recurrence computed it
        (time-major, detached), which the temporal gradients of ``W_hn`` and ``b_hn``
        read; None for the other cells.

    Examples
    --------
    >>> import torch
    >>> from sklearn_rnn.nn._stepwise import stepwise_recurrence
    >>> lstm = torch.nn.LSTM(8, 2, bias=False, batch_first=True)  # input weights: identity
    >>> with torch.no_grad():
    ...     _ = lstm.weight_ih_l0.copy_(torch.eye(8))
    >>> projected = torch.randn(3, 5, 8, requires_grad=True)
    >>> u, h, _ = stepwise_recurrence("lstm", projected, lstm.weight_hh_l0, None, ())
    >>> torch.allclose(h, lstm(projected)[0], atol=1e-6)
    True

    The gradient of ``u`` is the pre-activation delta of every gate and step; a full
    backward pass also reaches the recurrent weights:

    >>> (delta,) = torch.autograd.grad(h[:, -1].sum(), u, retain_graph=True)
    >>> delta.shape, bool(delta[:, -1].abs().sum() > 0)
    (torch.Size([3, 5, 8]), True)
    >>> h[:, -1].sum().backward()
    >>> lstm.weight_hh_l0.grad.shape
    torch.Size([8, 2])

    For the GRU the reset gates come back too:

    >>> gru = torch.nn.GRU(6, 2, batch_first=True)
    >>> u, h, resets = stepwise_recurrence("gru", torch.randn(3, 5, 6), gru.weight_hh_l0, gru.bias_hh_l0, ())
    >>> resets.shape, bool(((resets > 0) & (resets < 1)).all())
    (torch.Size([5, 3, 2]), True)
    """
    if cell not in STEPWISE_CELLS:
        raise ValueError(f"cell must be one of {list(STEPWISE_CELLS)}; got {cell!r}.")
    width, hidden = weight_hh.shape
    if projected.ndim != 3 or projected.shape[2] != width:
        raise ValueError(
            f"projected must have shape (batch, steps, {width}) for a {cell!r} cell of "
            f"{hidden} units; got {tuple(projected.shape)}."
        )
    if (cell == "gru") != (bias_hh is not None):
        raise ValueError(
            f"bias_hh is the GRU's recurrent bias: required for cell='gru', None for the "
            f"others; got {'None' if bias_hh is None else 'a tensor'} for cell={cell!r}."
        )
    dtype = weight_hh.dtype
    h0 = initial[0].to(dtype) if initial else None
    c0 = initial[1].to(dtype) if len(initial) > 1 else None
    if bias_hh is not None:
        bias_hh = bias_hh.to(dtype)
    record = _Record()
    u = _RecurrentWeights.apply(projected.to(dtype), weight_hh, bias_hh, record)
    weight = weight_hh.detach()  # its gradient comes from _RecurrentWeights
    if cell in ("tanh", "relu"):
        hidden_states = _Elman.apply(u, weight, h0, cell == "relu", record)
    elif cell == "lstm":
        hidden_states = _LSTM.apply(u, weight, h0, c0, record)
    else:
        hidden_states = _GRU.apply(u, weight, bias_hh.detach(), h0, record)  # type: ignore[union-attr]
    return u, hidden_states, record.resets


#: Steps whose derivative factors the backward passes compute at once: enough for
#: vectorized calls, few enough that their temporaries stay small and are reused.
_CHUNK = 16

#: Scale of the LSTM's gate blocks in the order i, f, o, g: the g block doubled.
_G_DOUBLED = torch.tensor([1.0, 1.0, 1.0, 2.0])[:, None, None]


class _Record:
    """What a recurrence's forward pass leaves for the recurrent weights' gradient."""

    __slots__ = ("first", "resets", "states")

    def __init__(self) -> None:
        self.states: torch.Tensor | None = None  # (T, B, H): h_t
        self.first: torch.Tensor | None = None  # (B, H): h_0, None for zero
        self.resets: torch.Tensor | None = None  # (T, B, H): the GRU's r_t


def _time_major(tensor: torch.Tensor) -> torch.Tensor:
    """``(B, T, n)`` to contiguous ``(T, B, n)`` (free when the memory already is)."""
    return tensor.transpose(0, 1).contiguous()


def _previous(states: torch.Tensor, first: torch.Tensor | None) -> torch.Tensor:
    """``(T, B, H)`` states shifted by one step, ``first`` (or zero) before the first."""
    start = states.new_zeros(1, *states.shape[1:]) if first is None else first[None]
    return torch.cat([start, states[:-1]])


def _tanh_(tensor: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    """``tanh`` as ``2 sigmoid(2 x) - 1``, in place or into ``out``.

    On the CPU measured, PyTorch's ``tanh`` of a ``(100, 50)`` float32 block takes about
    six times as long as its ``sigmoid`` (13 us against 2 us); these four calls take
    5 us. Both agree to a few units of rounding of values in ``[-1, 1]``.
    """
    doubled = tensor.mul_(2) if out is None else torch.mul(tensor, 2, out=out)
    return doubled.sigmoid_().mul_(2).sub_(1)


class _RecurrentWeights(torch.autograd.Function):
    """Identity on ``u``; its backward gives ``W_hh`` (and ``b_hh``) their gradients.

    The recurrence's delta of ``W_hh h_(t-1) + b_hh`` is ``dL/du`` itself, except for
    the GRU's candidate block, scaled by the reset gate ``r_t``.
    """

    @staticmethod
    def forward(
        ctx: Any, u: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, record: _Record
    ) -> torch.Tensor:
        ctx.record = record
        return u.view_as(u)

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        record: _Record = ctx.record
        if not (ctx.needs_input_grad[1] or ctx.needs_input_grad[2]):
            return grad, None, None, None
        assert record.states is not None  # set by the recurrence's forward pass
        with torch.autocast(grad.device.type, enabled=False):
            delta = _time_major(grad)  # (T, B, G * H)
            if record.resets is not None:
                hidden = record.resets.shape[2]
                candidate = delta[..., 2 * hidden :] * record.resets
                delta = torch.cat([delta[..., : 2 * hidden], candidate], dim=2)
            previous = _previous(record.states, record.first)  # (T, B, H)
            grad_weight = grad_bias = None
            if ctx.needs_input_grad[1]:
                grad_weight = delta.reshape(-1, delta.shape[2]).T @ previous.reshape(-1, previous.shape[2])
            if ctx.needs_input_grad[2]:
                grad_bias = delta.sum((0, 1))
        return grad, grad_weight, grad_bias, None


class _Elman(torch.autograd.Function):
    """``h_t = f(u_t + W h_{t-1})``; the backward's delta is ``f'(a_t) dL/dh_t``."""

    @staticmethod
    def forward(
        ctx: Any, u: torch.Tensor, weight: torch.Tensor, h0: torch.Tensor | None, relu: bool, record: _Record
    ) -> torch.Tensor:
        with torch.autocast(u.device.type, enabled=False):
            batch, steps, hidden = u.shape
            inputs = u.transpose(0, 1)  # (T, B, H), a view
            states = u.new_empty(steps, batch, hidden)
            h = u.new_zeros(batch, hidden) if h0 is None else h0
            weight_t = weight.T
            for t in range(steps):
                torch.addmm(inputs[t], h, weight_t, out=states[t])
                h = states[t].relu_() if relu else _tanh_(states[t])
        ctx.relu = relu
        ctx.save_for_backward(states, weight)
        record.states, record.first = states, h0
        return states.transpose(0, 1)  # (B, T, H)

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        states, weight = ctx.saved_tensors
        with torch.autocast(states.device.type, enabled=False):
            grad = grad.transpose(0, 1)  # (T, B, H), a view
            steps = states.shape[0]
            delta = torch.empty_like(states)
            total = torch.empty_like(states[0])  # dL/dh_t
            for t in range(steps - 1, -1, -1):
                if t == steps - 1:
                    total.copy_(grad[t])
                else:
                    torch.addmm(grad[t], delta[t + 1], weight, out=total)
                # f'(a_t) from h_t: 1 - h^2, or h > 0
                if ctx.relu:
                    torch.ops.aten.threshold_backward.grad_input(total, states[t], 0, grad_input=delta[t])
                else:
                    torch.ops.aten.tanh_backward.grad_input(total, states[t], grad_input=delta[t])
            grad_h0 = delta[0] @ weight if ctx.needs_input_grad[2] else None
        return delta.transpose(0, 1), None, grad_h0, None, None


def _chunks(steps: int) -> list[tuple[int, int]]:
    """``(lo, hi)`` blocks of :data:`_CHUNK` steps, last first (the backward's order)."""
    return [(max(0, hi - _CHUNK), hi) for hi in range(steps, 0, -_CHUNK)]


def _shifted(states: torch.Tensor, first: torch.Tensor | None, lo: int, hi: int) -> torch.Tensor:
    """``h_{t-1}`` for ``t`` in ``[lo, hi)``: ``(hi - lo, B, H)``."""
    if lo > 0:
        return states[lo - 1 : hi - 1]
    return _previous(states[:hi], first)


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
        record: _Record,
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
            i, f, o, g = (slice(k * hidden, (k + 1) * hidden) for k in range(4))
            for t in range(steps):
                act = gates[t].addmm_(h, weight_t).sigmoid_()  # (B, 4H): i, f, o, s
                torch.mul(act[:, f], c, out=cells[t])
                c = cells[t].addcmul_(act[:, i], act[:, g], value=2).sub_(act[:, i])  # f c + i (2s - 1)
                h = torch.mul(_tanh_(c, out=squashed[t]), act[:, o], out=states[t])
            gates[:, :, g].mul_(2).sub_(1)  # s to g
        ctx.save_for_backward(gates, cells, squashed, weight, c0)
        record.states, record.first = states, h0
        return states.transpose(0, 1)  # (B, T, H)

    @staticmethod
    @once_differentiable
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
            for lo, hi in _chunks(steps):
                i, f, o, g = gates[lo:hi].split(hidden, dim=2)
                tanh_c = squashed[lo:hi]
                # delta_t = [dc, dc, dc, dh] * factor_t: factors of a block of steps at once,
                # written where the deltas go. di = dc g i(1-i), df = dc c_{t-1} f(1-f),
                # dg = dc i (1-g^2), do = dh tanh(c) o(1-o).
                factors = (
                    sigmoid_backward(g, i),
                    sigmoid_backward(_shifted(cells, c0, lo, hi), f),
                    tanh_backward(i, g),
                    sigmoid_backward(tanh_c, o),
                )
                torch.cat(factors, dim=2, out=delta[lo:hi])
                to_cell = tanh_backward(o, tanh_c)  # dc_t += dh_t o (1 - tanh(c)^2)
                for t in range(hi - 1, lo - 1, -1):
                    if t == steps - 1:
                        dh.copy_(grad[t])
                    else:
                        torch.addmm(grad[t], delta[t + 1], weight, out=dh)
                    dc.addcmul_(dh, to_cell[t - lo])
                    delta[t].mul_(torch.cat((dc, dc, dc, dh), dim=1, out=spread))
                    dc.mul_(f[t - lo])  # the part of dL/dc_(t-1) through c_t
            grad_h0 = delta[0] @ weight if ctx.needs_input_grad[2] else None
            grad_c0 = dc if ctx.needs_input_grad[3] else None
        return delta.transpose(0, 1), None, grad_h0, grad_c0, None


class _GRU(torch.autograd.Function):
    """PyTorch's GRU over ``u``; keeps ``r, z``, ``n`` and the candidate's ``q_n = W_hn h + b_hn``."""

    @staticmethod
    def forward(
        ctx: Any,
        u: torch.Tensor,
        weight: torch.Tensor,
        bias: torch.Tensor,
        h0: torch.Tensor | None,
        record: _Record,
    ) -> torch.Tensor:
        with torch.autocast(u.device.type, enabled=False):
            batch, steps, width = u.shape
            hidden = width // 3
            inputs = u.transpose(0, 1)  # (T, B, 3H), a view
            resets = u.new_empty(steps, batch, 2 * hidden)  # r, z
            candidates = u.new_empty(steps, batch, hidden)  # n
            candidate_recurrent = torch.empty_like(candidates)  # q_n
            states = torch.empty_like(candidates)
            q = u.new_empty(batch, width)  # W h_{t-1} + b_hh, one step
            h = u.new_zeros(batch, hidden) if h0 is None else h0
            weight_t = weight.T
            rz, n = slice(0, 2 * hidden), slice(2 * hidden, width)
            for t in range(steps):
                torch.addmm(bias, h, weight_t, out=q)
                gate = torch.add(inputs[t, :, rz], q[:, rz], out=resets[t]).sigmoid_()
                candidate = torch.addcmul(inputs[t, :, n], gate[:, :hidden], q[:, n], out=candidates[t])
                candidate_recurrent[t].copy_(q[:, n])
                h = torch.lerp(_tanh_(candidate), h, gate[:, hidden:], out=states[t])  # n + z (h - n)
        ctx.save_for_backward(resets, candidates, candidate_recurrent, states, weight, h0)
        record.states, record.first, record.resets = states, h0, resets[:, :, :hidden]
        return states.transpose(0, 1)  # (B, T, H)

    @staticmethod
    @once_differentiable
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
            for lo, hi in _chunks(steps):
                r, z = resets[lo:hi].split(hidden, dim=2)
                n = candidates[lo:hi]
                # With dh = dL/dh_t: da_n = dh (1-z)(1-n^2), da_z = dh (h_{t-1} - n) z(1-z),
                # da_r = da_n q_n r(1-r); the recurrent part of the candidate gets da_n r.
                to_n = tanh_backward(1 - z, n)
                to_r = sigmoid_backward(candidate_recurrent[lo:hi], r).mul_(to_n)
                to_z = sigmoid_backward(_shifted(states, h0, lo, hi) - n, z)
                torch.cat((to_r, to_z, to_n), dim=2, out=delta[lo:hi])  # factors, then deltas
                to_through = torch.cat((to_r, to_z, to_n.mul_(r)), dim=2)
                for t in range(hi - 1, lo - 1, -1):
                    if t == steps - 1:
                        dh.copy_(grad[t])
                    else:
                        # dL/dh_t = grad_t + z_{t+1} dL/dh_{t+1} + W^T dL/dq_{t+1}
                        z_next = resets[t + 1, :, hidden:]
                        dh.mul_(z_next).add_(grad[t]).addmm_(through[(t + 1) % 2], weight)
                    torch.cat((dh, dh, dh), dim=1, out=spread)
                    delta[t].mul_(spread)
                    torch.mul(spread, to_through[t - lo], out=through[t % 2])
            grad_h0 = None
            if ctx.needs_input_grad[3]:
                grad_h0 = torch.addmm(dh * resets[0, :, hidden:], through[0], weight)
        return delta.transpose(0, 1), None, None, grad_h0, None
