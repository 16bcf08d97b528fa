"""Recurrent layers of :class:`~sklearn_rnn.nn.RecurrentNetwork`: Elman, GRU and LSTM cells.

Every layer splits its cell in two: an input projection ``u_t = W_in z_t + b`` of all
gate pre-activations at once (``G * H`` values: ``G = 1`` for the Elman cells, 3 for the
GRU, 4 for the LSTM), and a fused PyTorch recurrence (:class:`torch.nn.RNN`,
:class:`torch.nn.GRU`, :class:`torch.nn.LSTM`) whose input weights are frozen to the
identity. Run that way (:func:`identity_forward`), the gradient of ``u`` is the delta of
every gate pre-activation at every step, from which the temporal gradients of all
parameters follow in one backward pass (:func:`sklearn_rnn.optim.temporal_gradients`).
On a CPU, :func:`identity_forward` runs the same recurrence step by step instead
(:mod:`sklearn_rnn.nn._stepwise`), whose hand-written backward pass writes the deltas
directly, without the identity products.

When no temporal gradients are needed, :func:`fused_forward` runs the same cell in one
fused call on the raw inputs, with ``W_in`` and ``b`` as the kernel's input weights: the
identity product costs ``(G * H)^2`` per step and sequence, which for gated cells is
several times the recurrence itself on a CPU. Both give the same function; the first is
what the simplex optimizer trains with, the second what the other optimizers and
prediction use.

The cells follow PyTorch's equations (gate order ``i, f, g, o`` for the LSTM, ``r, z, n``
for the GRU). The GRU's candidate reads ``tanh(u_n + r_t * (W_hn h_{t-1} + b_hn))``,
PyTorch's (and cuDNN's) form, rather than ``W_hn (r_t * h_{t-1})`` of Cho et al. (2014)
and the lecture deck: the reset gate then scales a recurrent product that the fused
kernels compute anyway.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from typing import NamedTuple

import torch
from torch import nn

from ._stepwise import stepwise_recurrence
from .init import spectral_radius_

__all__ = ["GATES", "HIDDEN_INITS", "LayerStates", "fused_forward", "identity_forward"]

#: Gate pre-activations per hidden unit: the rows of ``W_in`` and ``W_rec`` are
#: ``GATES[cell] * hidden_size``.
GATES: dict[str, int] = {"tanh": 1, "relu": 1, "gru": 3, "lstm": 4}

#: How the state before the first step is set: zero, or a learned vector per layer.
HIDDEN_INITS: tuple[str, ...] = ("zero", "learned")

#: Initial forget-gate bias of the LSTM (Gers, Schmidhuber and Cummins, 2000;
#: Jozefowicz, Zaremba and Sutskever, 2015): the cell keeps its memory at first.
FORGET_BIAS: float = 1.0

_FUSED: dict[str, Callable[..., tuple[torch.Tensor, ...]]] = {
    "tanh": torch.rnn_tanh,
    "relu": torch.rnn_relu,
    "gru": torch.gru,
    "lstm": torch.lstm,
}

# cuDNN copies weights that are not views of one buffer (those of fused_forward are
# not) and says so on every call; the copy is small beside the recurrence.
_NOT_FLAT = "RNN module weights are not part of single contiguous chunk of memory"


class LayerStates(NamedTuple):
    """What one layer computed in :func:`identity_forward`, for temporal gradients.

    Attributes
    ----------
    inputs : torch.Tensor of shape (batch, steps, n_inputs)
        ``z_t``, what the input projection read: the network's inputs for the first
        layer, the (dropped-out) states of the layer below for the others.
    projected : torch.Tensor of shape (batch, steps, gates * hidden_size)
        ``u_t = W_in z_t + b``; its gradient is every gate pre-activation's delta.
    hidden : torch.Tensor of shape (batch, steps, hidden_size)
        The states ``h_t``.
    initial : tuple of torch.Tensor of shape (batch, hidden_size)
        The learned initial state as fed to the recurrence, expanded per sequence so
        that its gradient is per sequence: ``(h_0,)``, ``(h_0, c_0)`` for the LSTM, or
        ``()`` when it is zero.
    resets : torch.Tensor of shape (steps, batch, hidden_size) or None
        The GRU's reset gate ``r_t`` of every step (time-major), where the recurrence
        computed it step by step (on a CPU): the temporal gradients then read it
        instead of computing it again. None for the other cells and the fused kernels.

    Examples
    --------
    >>> import torch
    >>> from sklearn_rnn.nn import RecurrentNetwork
    >>> net = RecurrentNetwork(3, 4, 1, cell="lstm", generator=torch.Generator().manual_seed(0))
    >>> layer = net.forward_states(torch.randn(2, 5, 3), torch.tensor([5, 2])).layers[0]
    >>> layer.projected.shape, layer.hidden.shape, layer.initial
    (torch.Size([2, 5, 16]), torch.Size([2, 5, 4]), ())
    """

    inputs: torch.Tensor
    projected: torch.Tensor
    hidden: torch.Tensor
    initial: tuple[torch.Tensor, ...]
    resets: torch.Tensor | None = None


class StackedLayer(nn.Module):
    """Input projection and recurrence of one layer above the first.

    Parameters
    ----------
    cell : {'tanh', 'relu', 'gru', 'lstm'}
        The cell.
    input_size : int
        Inputs of the projection (the hidden size of the layer below).
    hidden_size : int
        Recurrent units.
    device : torch.device or str, optional
        Where to create the (uninitialized) parameters.

    Examples
    --------
    >>> from sklearn_rnn.nn._cells import StackedLayer
    >>> StackedLayer("gru", 8, 8, device="meta").input_projection.out_features
    24
    """

    def __init__(
        self, cell: str, input_size: int, hidden_size: int, *, device: torch.device | str | None = None
    ) -> None:
        super().__init__()
        self.input_projection = nn.Linear(input_size, GATES[cell] * hidden_size, device=device)
        self.recurrence = make_recurrence(cell, hidden_size, device=device)


def make_recurrence(cell: str, hidden_size: int, *, device: torch.device | str | None = None) -> nn.RNNBase:
    """The fused recurrence of ``cell`` over ``G * hidden_size`` projected inputs.

    Its input weights are frozen (``requires_grad=False``); :func:`reset_layer_` sets
    them to the identity. The Elman cells and the LSTM have no bias of their own (the
    projection's bias is the only one: a second would be redundant); the GRU keeps
    ``b_hh``, whose candidate block ``b_hn`` sits inside the reset gate, with a frozen
    zero ``b_ih``.

    Parameters
    ----------
    cell : {'tanh', 'relu', 'gru', 'lstm'}
    hidden_size : int
    device : torch.device or str, optional

    Returns
    -------
    torch.nn.RNNBase

    Examples
    --------
    >>> from sklearn_rnn.nn._cells import make_recurrence
    >>> lstm = make_recurrence("lstm", 4, device="meta")
    >>> tuple(lstm.weight_ih_l0.shape), lstm.weight_ih_l0.requires_grad
    ((16, 16), False)
    """
    width = GATES[cell] * hidden_size
    recurrence: nn.RNNBase
    if cell in ("tanh", "relu"):
        recurrence = nn.RNN(
            width, hidden_size, nonlinearity=cell, bias=False, batch_first=True, device=device
        )
    elif cell == "gru":
        recurrence = nn.GRU(width, hidden_size, bias=True, batch_first=True, device=device)
    else:
        recurrence = nn.LSTM(width, hidden_size, bias=False, batch_first=True, device=device)
    recurrence.weight_ih_l0.requires_grad_(False)
    if cell == "gru":
        recurrence.bias_ih_l0.requires_grad_(False)
    return recurrence


def reset_layer_(
    projection: nn.Linear,
    recurrence: nn.RNNBase,
    *,
    cell: str,
    spectral_radius: float | None,
    generator: torch.Generator | None,
) -> None:
    """Initialize one layer (thesis algorithm 3.1, extended to gated cells).

    With a ``spectral_radius``, ``W_rec`` is Gaussian and **each gate block** (``W_hr,
    W_hz, W_hn`` of the GRU; ``W_hi, W_hf, W_hg, W_ho`` of the LSTM) is rescaled to that
    radius on its own: each block is a square map of ``h_{t-1}`` into one gate, the only
    square matrices whose eigenvalues say how that gate's input grows or shrinks over
    steps (the stacked ``(G * H, H)`` matrix has no spectrum); rescaling the stack as a
    whole, say by its largest singular value, would leave the candidate block, the one
    carrying the state like the Elman ``W_rec``, at a radius that depends on the others.
    ``W_in`` is drawn from ``N(0, 0.1^2)``, biases are zero except the LSTM's forget
    gate, at :data:`FORGET_BIAS`. Without a radius, PyTorch's defaults: uniform in
    ``±1/sqrt(fan_in)`` for the projection, ``±1/sqrt(hidden_size)`` for the recurrence.

    Draw order: ``W_rec`` then ``W_in`` (spectral), or ``W_in``, ``b`` then ``W_rec``
    (uniform), as the one-layer Elman network always drew them.

    Parameters
    ----------
    projection : torch.nn.Linear
    recurrence : torch.nn.RNNBase
        From :func:`make_recurrence`.
    cell : {'tanh', 'relu', 'gru', 'lstm'}
    spectral_radius : float or None
    generator : torch.Generator or None
        A CPU generator; the global one when None.

    Examples
    --------
    >>> import torch
    >>> from sklearn_rnn.nn._cells import make_recurrence, reset_layer_
    >>> projection, lstm = torch.nn.Linear(2, 12), make_recurrence("lstm", 3)
    >>> reset_layer_(projection, lstm, cell="lstm", spectral_radius=1.2,
    ...              generator=torch.Generator().manual_seed(0))
    >>> [round(torch.linalg.eigvals(w.double()).abs().max().item(), 4)
    ...  for w in lstm.weight_hh_l0.detach().split(3)]
    [1.2, 1.2, 1.2, 1.2]
    >>> projection.bias.detach()[3:6]  # the forget gate
    tensor([1., 1., 1.])
    """
    hidden_size = recurrence.hidden_size
    weight_hh = recurrence.weight_hh_l0
    with torch.no_grad():
        recurrence.weight_ih_l0.copy_(torch.eye(recurrence.input_size))
        if cell == "gru":
            recurrence.bias_ih_l0.zero_()
        if spectral_radius is None:
            bound = 1 / math.sqrt(projection.in_features)
            uniform_(projection.weight, bound, generator)
            uniform_(projection.bias, bound, generator)
            uniform_(weight_hh, 1 / math.sqrt(hidden_size), generator)
            if cell == "gru":
                uniform_(recurrence.bias_hh_l0, 1 / math.sqrt(hidden_size), generator)
            return
        spectral_radius_(weight_hh, spectral_radius, generator=generator)
        normal_(projection.weight, 0.1, generator)
        projection.bias.zero_()
        if cell == "gru":
            recurrence.bias_hh_l0.zero_()
        if cell == "lstm":
            projection.bias[hidden_size : 2 * hidden_size] = FORGET_BIAS


def recurrent_bias(cell: str, recurrence: nn.RNNBase) -> torch.Tensor | None:
    """``b_hh`` of the GRU; None for the cells without one."""
    return recurrence.bias_hh_l0 if cell == "gru" else None


def identity_forward(
    cell: str,
    projection: nn.Linear,
    recurrence: nn.RNNBase,
    z: torch.Tensor,
    initial: tuple[torch.Tensor, ...],
) -> LayerStates:
    """Project, then run the recurrence so that the gradient of ``u`` is every delta.

    On a GPU: the fused (cuDNN) kernel with identity input weights, whose product with
    the identity is one large matrix product over all steps. Elsewhere: the step-by-step
    recurrence of :func:`~sklearn_rnn.nn._stepwise.stepwise_recurrence`, the same
    function without identity products (for an LSTM of 50 units on a CPU, the
    identity-input kernel costs about twice the plain one; see ``docs/performance.rst``).

    Parameters
    ----------
    cell : {'tanh', 'relu', 'gru', 'lstm'}
    projection : torch.nn.Linear
        ``W_in``, ``b``.
    recurrence : torch.nn.RNNBase
        From :func:`make_recurrence`.
    z : torch.Tensor of shape (batch, steps, n_inputs)
        The layer's inputs.
    initial : tuple of torch.Tensor of shape (batch, hidden_size)
        ``(h_0,)`` or ``(h_0, c_0)``; ``()`` for zero.

    Returns
    -------
    LayerStates

    Examples
    --------
    >>> import torch
    >>> from sklearn_rnn.nn._cells import identity_forward, make_recurrence, reset_layer_
    >>> projection, gru = torch.nn.Linear(2, 9), make_recurrence("gru", 3)
    >>> reset_layer_(projection, gru, cell="gru", spectral_radius=1.2, generator=None)
    >>> identity_forward("gru", projection, gru, torch.randn(4, 6, 2), ()).hidden.shape
    torch.Size([4, 6, 3])
    """
    projected = projection(z)  # (B, T, G * H)
    if not projected.is_cuda:
        # On a CPU, a loop over steps with a hand-written backward pass, whose gradient
        # of u is the deltas without any identity product (several times cheaper for
        # gated cells); on a GPU the fused kernel batches that product over all steps.
        bias_hh = recurrent_bias(cell, recurrence)
        u, hidden, resets = stepwise_recurrence(cell, projected, recurrence.weight_hh_l0, bias_hh, initial)
        return LayerStates(z, u, hidden, initial, resets)
    hx = _hx(cell, initial, z, recurrence.hidden_size)
    # The module's own (flattened, on cuDNN) weights, called as fused_forward calls the
    # kernel: training mode whenever gradients are on, so that a network in eval mode
    # (dropout off) still gets its temporal gradients on a GPU.
    weights = recurrence.all_weights[0]  # [I, W_hh] (+ [0, b_hh] for the GRU)
    args = (projected, hx, weights, recurrence.bias, 1, 0.0, torch.is_grad_enabled(), False, True)
    hidden = _quiet(_FUSED[cell], *args)[0]  # (B, T, H)
    return LayerStates(z, projected, hidden, initial)


def fused_forward(
    cell: str,
    projection: nn.Linear,
    recurrence: nn.RNNBase,
    z: torch.Tensor,
    initial: tuple[torch.Tensor, ...],
) -> torch.Tensor:
    """The same layer in one fused call on ``z``, with ``W_in`` as the input weights.

    Parameters
    ----------
    cell : {'tanh', 'relu', 'gru', 'lstm'}
    projection : torch.nn.Linear
    recurrence : torch.nn.RNNBase
    z : torch.Tensor of shape (batch, steps, n_inputs)
    initial : tuple of torch.Tensor of shape (batch, hidden_size)

    Returns
    -------
    torch.Tensor of shape (batch, steps, hidden_size)
        The states ``h_t``, as :func:`identity_forward` computes them (up to rounding).

    Examples
    --------
    >>> import torch
    >>> from sklearn_rnn.nn._cells import (fused_forward, identity_forward,
    ...                                    make_recurrence, reset_layer_)
    >>> projection, lstm = torch.nn.Linear(2, 12), make_recurrence("lstm", 3)
    >>> reset_layer_(projection, lstm, cell="lstm", spectral_radius=1.2, generator=None)
    >>> z = torch.randn(4, 6, 2)
    >>> torch.allclose(fused_forward("lstm", projection, lstm, z, ()),
    ...                identity_forward("lstm", projection, lstm, z, ()).hidden, atol=1e-6)
    True
    """
    bias_hh = recurrent_bias(cell, recurrence)
    if bias_hh is None:
        bias_hh = torch.zeros_like(projection.bias)  # (G * H,)
    weights = [projection.weight, recurrence.weight_hh_l0, projection.bias, bias_hh]
    hx = _hx(cell, initial, z, recurrence.hidden_size)
    # train=True keeps what cuDNN's backward needs; the kernel's own dropout is 0.
    args = (z, hx, weights, True, 1, 0.0, torch.is_grad_enabled(), False, True)
    return _quiet(_FUSED[cell], *args)[0]  # (B, T, H)


def _hx(
    cell: str, initial: tuple[torch.Tensor, ...], z: torch.Tensor, hidden_size: int
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """The fused kernels' ``hx``: ``(1, B, H)``, a pair of them for the LSTM."""
    if initial:
        states = [state.unsqueeze(0) for state in initial]  # (1, B, H) each
    else:
        zeros = z.new_zeros(1, z.shape[0], hidden_size)  # (1, B, H)
        states = [zeros, zeros] if cell == "lstm" else [zeros]
    return (states[0], states[1]) if cell == "lstm" else states[0]


def _quiet(function: Callable[..., tuple[torch.Tensor, ...]], *args: object) -> tuple[torch.Tensor, ...]:
    first = args[0]
    if not (isinstance(first, torch.Tensor) and first.is_cuda):
        return function(*args)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=_NOT_FLAT)
        return function(*args)


def dropout(tensor: torch.Tensor, p: float, generator: torch.Generator) -> torch.Tensor:
    """Inverted dropout with a local generator: zero each entry with probability ``p``.

    Parameters
    ----------
    tensor : torch.Tensor
    p : float
        Drop probability, in ``[0, 1)``.
    generator : torch.Generator
        On the tensor's device.

    Returns
    -------
    torch.Tensor
        ``tensor * mask / (1 - p)``.

    Examples
    --------
    >>> import torch
    >>> from sklearn_rnn.nn._cells import dropout
    >>> out = dropout(torch.ones(1000), 0.5, torch.Generator().manual_seed(0))
    >>> sorted(set(out.tolist())), 400 < int((out == 0).sum()) < 600
    ([0.0, 2.0], True)
    """
    keep = 1.0 - p
    # A contiguous draw: the masks do not depend on the tensor's memory layout (the
    # fused kernels return time-major memory behind batch-first shapes).
    mask = torch.empty(tensor.shape, dtype=tensor.dtype, device=tensor.device)
    mask.bernoulli_(keep, generator=generator)  # same shape as tensor
    return tensor * mask / keep


def uniform_(tensor: torch.Tensor, bound: float, generator: torch.Generator | None) -> None:
    """Fill with ``U(-bound, bound)``, drawn on the CPU in float64."""
    draw = torch.rand(tensor.shape, generator=generator, dtype=torch.float64)
    tensor.copy_((2 * draw - 1) * bound)


def normal_(tensor: torch.Tensor, std: float, generator: torch.Generator | None) -> None:
    """Fill with ``N(0, std^2)``, drawn on the CPU in float64."""
    tensor.copy_(torch.randn(tensor.shape, generator=generator, dtype=torch.float64) * std)
