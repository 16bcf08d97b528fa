"""The shared machinery of the step-by-step recurrences: the CPU path of temporal gradients.

Temporal gradients need ``delta_t = dL/du_t``, the delta of every gate pre-activation at
every step (:mod:`sklearn_rnn.optim`). The fused PyTorch kernels only give it when
``u`` is fed through input weights frozen to the identity
(:meth:`~sklearn_rnn.nn.cells.FusedCell.forward_states` on a GPU), which multiplies by a
``(G * H, G * H)`` identity at every step, forward and backward (and, on the CPU's
oneDNN kernel, also computes the identity's own unused gradient). For the GRU
(``G = 3``) and the LSTM (``G = 4``) those products cost several times the recurrence
itself.

:func:`~sklearn_rnn.nn.cells.stepwise_recurrence` runs the same cell as an explicit loop
over steps, in a :class:`torch.autograd.Function` with a hand-written backward pass
(each cell's own, next to its equations: ``_elman.py``, ``_gru.py``, ``_lstm.py``): the
forward keeps the gate activations, the backward walks the steps in reverse and writes
each step's gate deltas straight into the gradient of ``u``, so no identity product
exists at all. Elementwise derivative factors that do not depend on the incoming
gradient are computed for all steps at once (in chunks of :data:`CHUNK` steps, see
:func:`chunks`), leaving a handful of small operations per step (one
``(B, H) x (H, G * H)`` product each way). On a CPU this costs about what the fused
kernel costs without the identity (see ``docs/performance.rst``); on a GPU the
per-step launches would dominate, and the fused cuDNN kernel, which batches the
identity product over all steps, is used instead.

The recurrent weights get their gradient from a separate node between the projection
and the recurrence (:class:`RecurrentWeights`): a backward pass that asks only for the
gradient of ``u``, as :func:`~sklearn_rnn.optim.temporal_gradients` does, stops there
and never pays for ``sum_t delta_t h_(t-1)^T``, which the temporal gradients compute
step by step anyway; a full ``backward()`` still fills ``W_hh.grad``.

The hand-written backward passes are differentiable once (:func:`differentiable_once`):
recording their gradients (``create_graph=True``, as second derivatives need), running
them under a :mod:`torch.func` transform or pushing forward-mode tangents through them
(:mod:`torch.autograd.forward_ad`) fails with an error that names the cell and the way
out (:func:`once_differentiable_error`): differentiating the module's own forward
pass rather than ``forward_states``, with the cell trained on the fused kernel
(``trains_stepwise = False``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import torch

__all__ = [
    "CHUNK", "ONE", "TWO", "Record", "RecurrentWeights", "chunks", "differentiable_once", "once_differentiable_error",
    "padded_steps", "previous", "shifted", "tanh_", "tanh_of_doubled_", "time_major",
]

#: Steps whose derivative factors the backward passes compute at once: enough for
#: vectorized calls, few enough that their temporaries stay small and are reused.
CHUNK = 16

#: The constants of the per-step arithmetic as 0-dimensional tensors: ``x.mul_(TWO)``
#: gives the values of ``x.mul_(2)`` (1 and 2 are exact in every floating dtype, and a
#: 0-dimensional tensor takes the other operand's dtype and device), but a Python
#: number is wrapped into a tensor and converted on every call: 3.9 us against 1.8 us
#: for ``mul_`` then ``sub_`` on a ``(32, 50)`` block, paid at every step. Made on the
#: CPU whatever default device is set at import: a CPU scalar serves any device.
ONE, TWO = (torch.tensor(value, dtype=torch.float32, device="cpu") for value in (1.0, 2.0))


class Record:
    """What a recurrence's forward pass leaves for the recurrent weights' gradient.

    Parameters
    ----------
    cell : Cell
        The cell that runs (its :meth:`~sklearn_rnn.nn.cells.Cell.gate_recurrent_delta`
        turns ``dL/du`` into the recurrent part's delta).
    """

    __slots__ = ("cell", "first", "padded", "resets", "states", "stop")

    def __init__(self, cell: Any) -> None:
        self.cell = cell
        self.states: torch.Tensor | None = None  # (T, B, H): h_t
        self.first: torch.Tensor | None = None  # (B, H): h_0, None for zero
        self.resets: torch.Tensor | None = None  # (T, B, H): the GRU's r_t
        # Where a cell without a bounded state stops it (``stepwise_recurrence(lengths=)``):
        # True at padded steps, (T, B, 1), from step ``stop`` (the shortest length) on.
        self.padded: torch.Tensor | None = None
        self.stop = 0


def padded_steps(lengths: torch.Tensor, steps: int, device: torch.device) -> torch.Tensor:
    """``(T, B, 1)``, True at each sequence's padded steps: time-major, as the loops over
    steps read them.

    Parameters
    ----------
    lengths : torch.Tensor of shape (batch,)
        Valid steps of each sequence.
    steps : int
        The padded length.
    device : torch.device
        Where the mask is made.

    Returns
    -------
    torch.Tensor of bool

    Examples
    --------
    >>> import torch
    >>> from sklearn_rnn.nn.cells._stepwise import padded_steps
    >>> padded_steps(torch.tensor([3, 1]), 3, torch.device("cpu"))[..., 0]
    tensor([[False, False],
            [False,  True],
            [False,  True]])
    """
    return (torch.arange(steps, device=device)[:, None] >= lengths.to(device)[None, :])[..., None]


def time_major(tensor: torch.Tensor) -> torch.Tensor:
    """``(B, T, n)`` to contiguous ``(T, B, n)`` (free when the memory already is)."""
    return tensor.transpose(0, 1).contiguous()


def previous(states: torch.Tensor, first: torch.Tensor | None) -> torch.Tensor:
    """``(T, B, H)`` states shifted by one step, ``first`` (or zero) before the first."""
    start = states.new_zeros(1, *states.shape[1:]) if first is None else first[None]
    return torch.cat([start, states[:-1]])


def tanh_(tensor: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    """``tanh`` as ``2 sigmoid(2 x) - 1``, in place or into ``out``.

    On the CPU measured, PyTorch's ``tanh`` of a ``(100, 50)`` float32 block takes about
    six times as long as its ``sigmoid`` (13 us against 2 us); these four calls take
    5 us. Both agree to a few units of rounding of values in ``[-1, 1]``.
    """
    doubled = tensor.mul_(TWO) if out is None else torch.mul(tensor, TWO, out=out)
    return tanh_of_doubled_(doubled)


def tanh_of_doubled_(doubled: torch.Tensor) -> torch.Tensor:
    """``tanh(a)`` in place of ``2 a``: ``2 sigmoid(2 a) - 1``, the second half of
    :func:`tanh_`, for a loop that computes its pre-activation doubled (doubling is
    exact, so the values are those of :func:`tanh_`)."""
    return doubled.sigmoid_().mul_(TWO).sub_(ONE)


def functorch_transforms_active() -> bool:
    """Whether a :mod:`torch.func` transform is running (False where PyTorch cannot say)."""
    active = getattr(torch._C, "_are_functorch_transforms_active", None)
    return bool(active()) if active is not None else False


def forward_ad_active() -> bool:
    """Whether a forward-mode AD level (:func:`torch.autograd.forward_ad.dual_level`) is
    open (False where PyTorch cannot say)."""
    return getattr(torch.autograd.forward_ad, "_current_level", -1) >= 0


def has_tangent(*tensors: torch.Tensor | None) -> bool:
    """Whether any of ``tensors`` carries a forward-mode tangent (a dual tensor)."""
    if not forward_ad_active():
        return False
    unpack = torch.autograd.forward_ad.unpack_dual
    return any(tensor is not None and unpack(tensor).tangent is not None for tensor in tensors)


def _batched(grads: tuple[Any, ...]) -> bool:
    """Whether gradients come batched by a vmap (torch.autograd.functional.jacobian with
    ``vectorize=True`` batches the backward pass with PyTorch's older vmap); False where
    PyTorch cannot say."""
    functorch = getattr(torch._C, "_functorch", None)
    checks = [getattr(functorch, name, None) for name in ("is_batchedtensor", "is_legacy_batchedtensor")]
    return any(check(grad) for grad in grads if isinstance(grad, torch.Tensor) for check in checks if check)


def differentiable_once(backward: Callable[..., tuple[Any, ...]]) -> Callable[..., tuple[Any, ...]]:
    """Mark a hand-written backward pass as differentiable once (a decorator).

    The pass runs without recording a graph. Asked to record one (``create_graph=True``,
    which second derivatives, gradient penalties and Hessians need), it raises an error
    naming the cell (``ctx.cell``, set by the forward pass) and the way to a second
    derivative: training that cell on PyTorch's fused kernel. It refuses the recording
    itself, not a second derivative that reaches it: one taken with respect to inputs
    only, or through a gradient that needs none of its own (a frozen readout), would
    never reach such a node and would come out silently without the recurrence's part.

    Parameters
    ----------
    backward : callable
        The ``backward(ctx, *grads)`` of a :class:`torch.autograd.Function` whose
        forward pass sets ``ctx.cell``.

    Returns
    -------
    callable
        The same backward pass, guarded.
    """

    @functools.wraps(backward)
    def guarded(ctx: Any, *grads: Any) -> tuple[Any, ...]:
        # A backward pass runs with grad on under create_graph=True only; a torch.func
        # transform (vmap of jacobian(vectorize=True)) batches it, which it cannot be.
        if torch.is_grad_enabled() or functorch_transforms_active() or _batched(grads):
            what = "record the gradient of" if torch.is_grad_enabled() else "batch (vmap) the backward pass of"
            raise once_differentiable_error(ctx.cell, what)
        with torch.no_grad():
            return backward(ctx, *grads)

    return guarded


def once_differentiable_error(cell: Any, what: str) -> RuntimeError:
    """The error for a step-by-step recurrence asked for more than one plain derivative.

    Parameters
    ----------
    cell : Cell
        The cell whose recurrence was asked (its ``name`` and ``trains_stepwise``).
    what : str
        What was asked, as ``'record the gradient of'``.

    Returns
    -------
    RuntimeError
        Its message names where the recurrence runs and the way out of each place.
    """
    name = cell.name
    training = (
        " and when a network trains on a CPU. For second derivatives (a gradient penalty, "
        "Hessians), vectorized Jacobians or forward-mode derivatives, differentiate the "
        "module's own forward pass (net(x, lengths)), not forward_states; for sklearn_rnn's "
        "networks on a CPU, also run the cell on PyTorch's fused kernel: "
        f"sklearn_rnn.nn.get_cell({name!r}).trains_stepwise = False."
        if cell.trains_stepwise else
        ". For second derivatives (a gradient penalty, Hessians), vectorized Jacobians or "
        "forward-mode derivatives, differentiate the module's own forward pass "
        "(net(x, lengths)), not forward_states: under a torch.func transform or a "
        "forward-mode AD level it runs the cell's plain tensor operations on a CPU, "
        "PyTorch's fused kernel elsewhere."
    )
    return RuntimeError(
        f"Cannot {what} the step-by-step recurrence of cell {name!r}: its hand-written "
        "backward pass is differentiable once (no create_graph=True), not vectorized "
        "(no torch.func, no jacobian(vectorize=True)) and has no forward mode (no "
        "torch.autograd.forward_ad). That recurrence runs in "
        f"forward_states on a CPU (temporal gradients need it){training}"
    )


class RecurrentWeights(torch.autograd.Function):
    """Identity on ``u``; its backward gives ``W_hh`` (and ``b_hh``) their gradients.

    The recurrence's delta of ``W_hh h_(t-1) + b_hh`` is ``dL/du`` itself, except where
    the cell gates the recurrent part (the GRU's candidate block, scaled by the reset
    gate ``r_t``): the record's cell says (``gate_recurrent_delta``).
    """

    @staticmethod
    def forward(
        ctx: Any, u: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, record: Record
    ) -> torch.Tensor:
        ctx.record, ctx.cell = record, record.cell
        return u.view_as(u)

    @staticmethod
    @differentiable_once
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        record: Record = ctx.record
        if not (ctx.needs_input_grad[1] or ctx.needs_input_grad[2]):
            return grad, None, None, None
        assert record.states is not None  # set by the recurrence's forward pass
        with torch.autocast(grad.device.type, enabled=False):
            delta = record.cell.gate_recurrent_delta(time_major(grad), record.resets)  # (T, B, G * H)
            before = previous(record.states, record.first)  # (T, B, H)
            grad_weight = grad_bias = None
            if ctx.needs_input_grad[1]:
                grad_weight = delta.reshape(-1, delta.shape[2]).T @ before.reshape(-1, before.shape[2])
            if ctx.needs_input_grad[2]:
                grad_bias = delta.sum((0, 1))
        return grad, grad_weight, grad_bias, None


def chunks(steps: int) -> list[tuple[int, int]]:
    """``(lo, hi)`` blocks of :data:`CHUNK` steps, last first (the backward's order)."""
    return [(max(0, hi - CHUNK), hi) for hi in range(steps, 0, -CHUNK)]


def shifted(states: torch.Tensor, first: torch.Tensor | None, lo: int, hi: int) -> torch.Tensor:
    """``h_{t-1}`` for ``t`` in ``[lo, hi)``: ``(hi - lo, B, H)``."""
    if lo > 0:
        return states[lo - 1 : hi - 1]
    return previous(states[:hi], first)
