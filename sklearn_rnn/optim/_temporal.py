"""Temporal gradients of a :class:`~sklearn_rnn.nn.RecurrentNetwork` in one backward pass.

(A PyTorch :class:`torch.nn.RNN`, :class:`torch.nn.GRU` or :class:`torch.nn.LSTM` gets
the same treatment through :class:`~sklearn_rnn.optim.RecurrentAdapter`, which runs its
parameters with the input projection outside the recurrence; see
:mod:`sklearn_rnn.optim._adapter`.)

The temporal gradient of step ``t`` (thesis eq. 3.1-3.2) is the gradient with respect to
the ``t``-th replica of the shared parameters. For the Elman network
``a_t = W_rec h_{t-1} + W_in x_t + b``, ``h_t = f(a_t)``, ``o_t = W_out h_t + b_out``
every replica's gradient is an outer product summed over the batch:

* ``[W_rec | W_in | b]|t = sum_b delta_{b,t} [h_{b,t-1}; x_{b,t}; 1]^T`` with
  ``delta_t = dL/da_t``, the pre-activation delta;
* ``[W_out | b_out]|t = sum_b e_{b,t} [h_{b,t}; 1]^T`` with ``e_t = dL/do_t``, where a
  loss sits at step ``t``.

:class:`~sklearn_rnn.nn.RecurrentNetwork` computes ``u = W_in x + b`` outside its fused
recurrence, so ``dL/du`` is exactly ``delta`` at every step: one backward pass gives
every delta, and the per-step norms and weighted combinations that the simplex
direction needs are a few batched matrix products over them, with no loop over steps.

The same holds for every layer of a stacked network and for the gated cells, whose
``u`` holds every gate's input part (see :mod:`sklearn_rnn.nn.cells._gru` for the GRU's
reset-gated candidate). A *step replica* of a stacked network is the replica of all its
layers' parameters at step ``t``: one norm per step over all of them, as the thesis
takes one norm over all blocks of its one-layer network; every layer's step ``t`` sits
in the same aligned step (the layers run in lockstep). A learned initial state is used
once, before each sequence's first step: its replica is that step's.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Literal

import torch

from ..nn._network import NetworkStates, RecurrentNetwork, as_lengths
from ..nn.cells import Cell, LayerStates, cell_names
from ._adapter import RecurrentAdapter
from ._functional import _norm, _overflowed, _working_dtype

__all__ = ["TemporalGradients", "temporal_gradients"]

#: Thesis names of the parameters of a one-layer network, in the order temporal
#: gradients list them. Layers above the first add their own with a suffix (``'W_rec[1]'``);
#: the GRU adds ``'b_rec'`` (its ``b_hh``) after ``'W_rec'``, a learned initial state
#: ``'h_0'`` (and ``'c_0'``) before the readout.
PARAMETER_NAMES: tuple[str, ...] = ("W_rec", "W_in", "b", "W_out", "b_out")

# Largest intermediate (in elements) built at once for per-step quantities: per-step
# gradients are kept when they fit (64 MiB in float32), otherwise norms are computed in
# chunks of steps so that memory stays bounded.
_CHUNK_ELEMENTS = 1 << 24

Alignment = Literal["last", "absolute"]
NormMethod = Literal["auto", "direct", "gram"]


@dataclass(frozen=True)
class _Block:
    """One parameter of a layer: its gradient at row ``s`` is ``sum_b delta_{s,b} z_{s,b}^T``.

    ``inputs`` is ``(S - offset, B, n)``: row ``r`` pairs with delta row ``r + offset``
    (``offset=1`` for ``W_rec``, whose input ``h_{t-1}`` does not exist at the first
    step); None is a bias, whose input is 1.
    """

    index: int
    inputs: torch.Tensor | None
    offset: int = 0


@dataclass
class _Layer:
    """An affine map of the network: time-major, aligned deltas and its parameter blocks.

    ``delta`` is ``(S, B, m)``; ``rows`` maps its ``S`` rows onto the aligned steps
    (None: the identity). ``outer`` holds each block's per-row gradients once computed:
    ``(S - offset, m, n)``, or ``(S, m)`` for a bias.
    """

    delta: torch.Tensor
    rows: torch.Tensor | None
    blocks: tuple[_Block, ...]
    outer: tuple[torch.Tensor, ...] | None = None

    @property
    def width(self) -> int:
        """``n`` summed over blocks: the columns of the layer's ``[W | b]`` matrix."""
        return sum(1 if b.inputs is None else b.inputs.shape[2] for b in self.blocks)

    def materialize(self) -> tuple[torch.Tensor, ...]:
        """Per-row gradient of every block: one batched matrix product each."""
        if self.outer is None:
            self.outer = tuple(_block_outer(self.delta, block) for block in self.blocks)
        return self.outer


class TemporalGradients:
    """The temporal gradients of one batch, held as deltas and layer inputs.

    Built by :func:`temporal_gradients`. Steps are *aligned* steps (see
    :func:`temporal_gradients`): for last-step losses index ``steps - 1`` is the loss
    step of every sequence. When it is cheaper than the alternatives and fits in 64 MiB,
    every step's gradient is computed once by batched outer products, and the full
    gradient, norms and combinations derive from it; otherwise nothing of shape
    ``(steps, *parameter_shape)`` is stored and norms come from Gram matrices or chunks.

    Parameters
    ----------
    parameters : tuple of torch.nn.Parameter
        The trainable parameters covered (see Attributes).
    names : tuple of str
        Their thesis names.
    layers : tuple
        Per-layer deltas and layer inputs gathered by :func:`temporal_gradients`
        (internal records; build instances through that function).
    steps : int
        Number of aligned steps.
    alignment : {'last', 'absolute'}
        How steps of sequences of different lengths line up.
    counts : torch.Tensor of shape (steps,)
        Sequences contributing to each aligned step.
    loss : torch.Tensor
        The loss, detached.
    network : RecurrentNetwork or RecurrentAdapter, optional
        The network they are of; error messages name its parameters.

    Attributes
    ----------
    parameters : tuple of torch.nn.Parameter
        The trainable parameters covered, layer by layer (``W_rec``, the GRU's
        ``b_rec``, ``W_in``, ``b``), then a learned initial state, then ``W_out``,
        ``b_out`` (frozen ones left out).
    names : tuple of str
        Their thesis names (``'W_rec'``, ``'W_in'``, ``'b'``, ``'W_out'``, ``'b_out'``;
        see ``PARAMETER_NAMES`` for the others).
    gradient : tuple of torch.Tensor
        The full gradient of the loss, one block per parameter: the sum of the temporal
        gradients over steps.
    gradient_norm : float
        Its Euclidean norm over all blocks (computed when first read).
    loss : torch.Tensor
        The loss, detached.
    alignment : {'last', 'absolute'}
        How steps of sequences of different lengths line up.
    counts : torch.Tensor of shape (steps,)
        How many sequences contribute to each aligned step.
    steps : int
        Number of aligned steps (the padded length of the batch).

    Examples
    --------
    >>> import torch
    >>> from sklearn_rnn.nn import RecurrentNetwork
    >>> from sklearn_rnn.optim import temporal_gradients
    >>> gen = torch.Generator().manual_seed(0)
    >>> net = RecurrentNetwork(2, 4, 1, generator=gen)
    >>> x, lengths = torch.randn(3, 6, 2, generator=gen), torch.tensor([6, 6, 3])
    >>> states = net.forward_states(x, lengths)
    >>> tg = temporal_gradients(net, states, states.outputs.sum(), lengths)
    >>> tg.names
    ('W_rec', 'W_in', 'b', 'W_out', 'b_out')
    >>> tg.norms().shape, tg.cosines().shape, tg.per_step()[1].shape  # W_in: (steps, 4, 2)
    (torch.Size([6]), torch.Size([6]), torch.Size([6, 4, 2]))
    >>> ones = torch.ones(6)
    >>> all(torch.allclose(c, g) for c, g in zip(tg.combine(ones), tg.gradient))
    True
    """

    def __init__(
        self,
        *,
        parameters: tuple[torch.nn.Parameter, ...],
        names: tuple[str, ...],
        layers: tuple[_Layer, ...],
        steps: int,
        alignment: Alignment,
        counts: torch.Tensor,
        loss: torch.Tensor,
        network: RecurrentNetwork | RecurrentAdapter | None = None,
    ) -> None:
        self.parameters = parameters
        self.names = names
        self._network = network
        self.steps = steps
        self.alignment = alignment
        self.counts = counts
        self.loss = loss
        self._layers = layers
        self._norms: dict[str, torch.Tensor] = {}
        self._computed_norms: dict[str, torch.Tensor] = {}  # before any rescue from overflow
        _materialize_cheap(layers)
        self.gradient = self.combine(None)

    @cached_property
    def gradient_norm(self) -> float:
        """The full gradient's Euclidean norm over all blocks (computed when first read:
        a value read on the host, which on a GPU waits for the device)."""
        return _norm(self.gradient)

    def __repr__(self) -> str:
        return (
            f"TemporalGradients(steps={self.steps}, alignment={self.alignment!r}, "
            f"parameters={list(self.names)}, gradient_norm={self.gradient_norm:.4g})"
        )

    def norms(self, method: NormMethod = "auto") -> torch.Tensor:
        """Norm of each step's gradient over all parameter blocks together.

        ``'direct'`` takes the squared norms of the per-step outer products (reusing
        them when they are kept, otherwise computing them in chunks of steps; cost
        ``H * (H + d)`` per sequence and step); ``'gram'`` uses
        ``||sum_b d_b z_b^T||^2 = sum_{b,b'} (d_b . d_b') (z_b . z_b')`` (cost
        ``batch * (2H + d)``, no ``(H, H)`` block per step); ``'auto'`` picks the
        cheaper. The result is cached. The squares are summed in the parameters' dtype,
        at least float32 (in float16 a step whose gradient's norm is below about 2.4e-4
        would get norm 0). Where they overflow (a step's entries above about 1.8e19 in
        float32: an exploding gradient), that step's norm is recomputed in float64 on
        deltas divided by their largest magnitude: a norm is not finite only where an
        entry is not (or past the dtype's range). Whether any overflowed is one value
        read on the host (on a GPU, a wait for the device); ``'gram'`` reads one more,
        whether a step's terms cancelled (near-identical sequences with opposite
        residuals), and forms such steps directly, whose Gram sum would be mostly rounding.

        Parameters
        ----------
        method : {'auto', 'direct', 'gram'}, default='auto'
            How to compute them; all give the same values up to rounding.

        Returns
        -------
        torch.Tensor of shape (steps,)
            In the parameters' dtype, at least float32.
        """
        if method not in ("auto", "direct", "gram"):
            raise ValueError(f"method must be 'auto', 'direct' or 'gram'; got {method!r}.")
        return self._step_norms(method, rescue=True)

    def _step_norms(self, method: NormMethod = "auto", *, rescue: bool) -> torch.Tensor:
        """:meth:`norms`; with ``rescue=False`` as computed, without reading on the host
        whether squares overflowed (the simplex rule checks that with the branch's inputs)."""
        if method not in self._norms:
            if method not in self._computed_norms:
                squares = self._zeros(_working_dtype(self.gradient[0].dtype))
                for layer in self._layers:
                    _scatter_add(squares, layer.rows, _layer_squares(layer, method))
                self._computed_norms[method] = squares.sqrt()  # (T,)
            norms = self._computed_norms[method]
            if not rescue:
                return norms
            self._norms[method] = (
                _rescued_norms(self._layers, norms, lambda wide: _layer_squares(wide, method))
                if _overflowed(norms) else norms
            )
        return self._norms[method]

    def combine(self, coefficients: torch.Tensor | None) -> tuple[torch.Tensor, ...]:
        """``sum_t c_t G_t``, the per-step gradients weighted by ``coefficients``.

        From the kept per-step gradients when there are any, otherwise one matrix
        product per block on deltas pre-scaled by their step's coefficient. With
        ``c = beta * normalization_factors(self.norms())`` this is eq. 3.4.

        Parameters
        ----------
        coefficients : torch.Tensor of shape (steps,) or None
            One coefficient per aligned step; None weights every step by one (the full
            gradient).

        Returns
        -------
        tuple of torch.Tensor
            One block per parameter, shaped like it, in its dtype; with coefficients in
            at least float32 (a float16 block could not hold the factors ``1 / norm``
            of small steps).
        """
        if coefficients is not None and coefficients.shape != (self.steps,):
            raise ValueError(
                f"coefficients must have shape ({self.steps},), one per aligned step; got "
                f"{tuple(coefficients.shape)}."
            )
        blocks: dict[int, torch.Tensor] = {}
        for layer in self._layers:
            c = None
            work = layer.delta.dtype
            if coefficients is not None:
                work = _working_dtype(work)
                c = coefficients.to(layer.delta.device, work)
                c = c if layer.rows is None else c[layer.rows]  # (S,)
            if layer.outer is not None:
                for block, outer in zip(layer.blocks, layer.outer):
                    blocks[block.index] = _weighted_sum(None if c is None else c[block.offset :], outer.to(work))
                continue
            delta = layer.delta if c is None else layer.delta.to(work) * c[:, None, None]  # (S, B, m)
            m = delta.shape[2]
            for block in layer.blocks:
                if block.inputs is None:
                    blocks[block.index] = delta.sum((0, 1))  # (m,)
                else:
                    rows = delta[block.offset :].reshape(-1, m)  # (S' * B, m)
                    inputs = block.inputs.to(work)
                    blocks[block.index] = rows.T @ inputs.reshape(-1, inputs.shape[2])  # (m, n)
        # A learned initial state (layers, H) is held flat, as one bias of layers * H.
        return tuple(blocks[i].reshape(p.shape).contiguous() for i, p in enumerate(self.parameters))

    def cosines(self) -> torch.Tensor:
        """Cosine between each step's gradient and the full gradient (figures 3.2-3.3).

        ``G_t . G = sum_b delta_{b,t} . (G z_{b,t})``: one batched product per block.
        Steps with a zero gradient get NaN.

        Returns
        -------
        torch.Tensor of shape (steps,)
        """
        dots = self._zeros()
        for layer in self._layers:
            per_row = torch.zeros_like(layer.delta[:, 0, 0])  # (S,)
            for i, block in enumerate(layer.blocks):
                full = self.gradient[block.index]
                if layer.outer is not None:
                    outer = layer.outer[i]
                    full = full.reshape(outer.shape[1:])
                    per_row[block.offset :] += (outer * full).sum(tuple(range(1, outer.ndim)))
                elif block.inputs is None:
                    per_row += layer.delta.sum(1) @ full.reshape(-1)  # (S,)
                else:
                    projected = block.inputs @ full.T  # (S', B, m)
                    per_row[block.offset :] += (layer.delta[block.offset :] * projected).sum((1, 2))
            _scatter_add(dots, layer.rows, per_row)
        return dots / (self.norms() * self.gradient_norm)  # (T,)

    def per_step(self) -> tuple[torch.Tensor, ...]:
        """Every step's gradient, materialized: the reference form, for small problems.

        Returns
        -------
        tuple of torch.Tensor
            One block per parameter, of shape ``(steps, *parameter.shape)``; their sum
            over the first axis is :attr:`gradient`.
        """
        blocks: dict[int, torch.Tensor] = {}
        for layer in self._layers:
            outers = layer.outer if layer.outer is not None else layer.materialize()
            for block, outer in zip(layer.blocks, outers):
                full = outer.new_zeros(self.steps, *outer.shape[1:])  # (T, ...)
                rows = _rows(layer, outer.device)[block.offset :]
                full[rows] = outer
                blocks[block.index] = full
        return tuple(blocks[i].reshape(self.steps, *p.shape) for i, p in enumerate(self.parameters))

    def parameter_norms(self) -> dict[str, torch.Tensor]:
        """Per-step norm of each parameter's temporal gradient separately.

        Where the squares overflow (an exploding gradient), a layer's norms are
        recomputed as :meth:`norms` recomputes its own: a norm is not finite only where
        an entry is not (or past the dtype's range). Whether any overflowed is one value
        read on the host per layer.

        Returns
        -------
        dict of str to torch.Tensor of shape (steps,)
            Keyed by thesis name (``'W_rec'``, ...), in the order of :attr:`names`; in
            the parameters' dtype, at least float32 (as :meth:`norms`).
        """
        result: dict[str, torch.Tensor] = {}
        for layer in self._layers:
            squares = torch.stack(_block_squares(layer), 1)  # (S, blocks)
            full = squares.new_zeros(self.steps, squares.shape[1])  # (T, blocks)
            _scatter_add(full, layer.rows, squares)
            norms = full.sqrt()
            if _overflowed(norms):  # recomputed as norms() does, block by block
                norms = _rescued_norms([layer], norms, lambda wide: torch.stack(_block_squares(wide), 1))
            for block, block_norms in zip(layer.blocks, norms.unbind(1)):
                result[self.names[block.index]] = block_norms
        return {name: result[name] for name in self.names}

    def _zeros(self, dtype: torch.dtype | None = None) -> torch.Tensor:
        """Zeros ``(steps,)`` on the gradient's device, in ``dtype`` (None: the gradient's)."""
        reference = self.gradient[0]
        return torch.zeros(self.steps, dtype=reference.dtype if dtype is None else dtype, device=reference.device)


def temporal_gradients(
    network: RecurrentNetwork | RecurrentAdapter,
    states: NetworkStates,
    loss: torch.Tensor,
    lengths: torch.Tensor,
    *,
    accumulate_grad: bool = True,
    loss_scale: float | None = None,
) -> TemporalGradients:
    """Every step's gradient of ``loss``, in one backward pass.

    The temporal gradient of step ``t`` is the gradient with respect to the ``t``-th
    replica of the shared parameters (``W_rec``, ``W_in``, ``b``, and ``W_out``,
    ``b_out`` where a loss sits at step ``t``); they sum to the full gradient. One
    backward pass yields the pre-activation delta of every step (the gradient of
    ``states.projected``) and the gradient of the outputs; everything else is batched
    matrix products over them.

    **How steps line up in a variable-length batch.** With a loss on each sequence's
    last valid step (``states.outputs`` of shape ``(batch, output_size)``), steps are
    aligned by distance from the loss: aligned step ``steps - 1`` is every sequence's
    last valid step, aligned step ``steps - 1 - k`` is ``k`` steps before it, and a
    sequence of length ``L`` contributes to the last ``L`` aligned steps only
    (``alignment='last'``). With a loss at every step (``states.outputs`` of shape
    ``(batch, steps, output_size)``), steps are aligned by absolute position
    (``alignment='absolute'``); that loss must give padded steps zero weight (mask it
    with the lengths): the temporal gradients stop at each sequence's last valid step,
    while what a loss puts past it would reach the valid steps' gradients through the
    recurrence, so a loss whose gradient is nonzero at a padded step raises a
    ValueError. In both cases aligned step 0 has a zero ``W_rec`` gradient, because
    ``h_0 = 0``.

    Parameters
    ----------
    network : RecurrentNetwork or RecurrentAdapter
        The network that produced ``states``: the package's network, or a PyTorch
        :class:`torch.nn.RNN`, :class:`torch.nn.GRU` or :class:`torch.nn.LSTM` and its
        readout wrapped in a :class:`RecurrentAdapter`. States of another network (a
        copy of this one) raise a ValueError, found through the readout's weight when
        it trains.
    states : NetworkStates
        ``network.forward_states(x, lengths, every_step=...)``, run with autograd on.
    loss : torch.Tensor
        A scalar computed from ``states.outputs`` at valid steps (padded steps, past
        each sequence's length, given zero weight), that depends on the parameters only
        through ``states`` (a weight penalty on the parameters themselves would be
        missed). A loss at every step that reaches padded steps (through the outputs or
        the states) raises a ValueError; a loss at the last step is not checked for it
        (the check is a read on the host, which a GPU waits for at every update): its
        temporal gradients would not add up to the gradient. A loss that does not reach ``states.outputs`` (computed from another
        forward pass, or from detached outputs) raises a ValueError rather than give
        zero temporal gradients.
    lengths : torch.Tensor of shape (batch,)
        The lengths given to ``forward_states``.
    accumulate_grad : bool, default=True
        Add the full gradient to the ``.grad`` of each parameter the temporal gradients
        cover (the network's), as ``loss.backward()`` would, so that any optimizer can
        step them; False leaves ``.grad`` untouched. Parameters before the network (an
        embedding) get no ``.grad`` from it, and parameter hooks (``register_hook``) do
        not run: train such a model with ``loss.backward()``.
    loss_scale : float, optional
        Mixed precision: the factor ``loss`` was multiplied by (``scaler.scale(loss)``
        of a :class:`torch.amp.GradScaler`, whose ``get_scale()`` it is). Every result
        is divided by it (the deltas first, in the parameters' dtype), while ``.grad``
        gets the scaled gradient, as ``loss.backward()`` would give it, for
        ``scaler.unscale_(optimizer)`` to unscale and check for infinities.

    Returns
    -------
    TemporalGradients

    Examples
    --------
    >>> import torch
    >>> from sklearn_rnn.nn import RecurrentNetwork
    >>> from sklearn_rnn.optim import temporal_gradients
    >>> gen = torch.Generator().manual_seed(0)
    >>> net = RecurrentNetwork(2, 8, 1, generator=gen)
    >>> x, lengths = torch.randn(3, 5, 2, generator=gen), torch.tensor([5, 4, 2])
    >>> states = net.forward_states(x, lengths)
    >>> loss = states.outputs.square().mean()
    >>> tg = temporal_gradients(net, states, loss, lengths)
    >>> tg.norms().shape, tg.counts.tolist()
    (torch.Size([5]), [1, 2, 2, 3, 3])
    >>> tg.per_step()[0][0].abs().max().item()  # W_rec at the first step: h_0 = 0
    0.0
    >>> torch.allclose(tg.per_step()[0].sum(0), net.recurrent_weight.grad)
    True

    A loss scaled for float16 training gives the same, unscaled, temporal gradients:

    >>> states = net.forward_states(x, lengths)
    >>> scaled = temporal_gradients(net, states, 1024 * states.outputs.square().mean(),
    ...                              lengths, accumulate_grad=False, loss_scale=1024)
    >>> torch.allclose(scaled.norms(), tg.norms())
    True
    """
    if not isinstance(network, (RecurrentNetwork, RecurrentAdapter)):
        raise TypeError(
            "temporal_gradients needs a sklearn_rnn.nn.RecurrentNetwork, or a torch.nn.RNN, "
            "GRU or LSTM with its readout wrapped in sklearn_rnn.optim.RecurrentAdapter(rnn, "
            f"readout) (networks whose input projections are computed outside the "
            f"recurrence); got {type(network).__name__}."
        )
    stack = _layer_parameters(network)
    if not all(cell.temporal_gradients for cell, _ in stack):
        raise ValueError(
            f"temporal gradients are not available for cell={network.cell!r}: they need one "
            f"of {sorted(cell_names(temporal_gradients=True))}, whose recurrence reads h_(t-1) "
            "through W_rec alone. Train this network with another optimizer (ClippedSGD, or "
            "'sgd'/'adam' in the estimators)."
        )
    if getattr(network, "readout_mode", "last") != "last":
        raise ValueError(
            f"temporal gradients need the readout at the last step, readout='last'; this "
            f"network reads readout={network.readout_mode!r}, whose mean and maximum over the "
            "steps inject the loss at every step. Build it with readout='last' (estimators: "
            "readout='last', which optimizer='simplex' chooses under readout='auto')."
        )
    if getattr(network, "conv", None) is not None:
        raise ValueError(
            "temporal gradients cover the recurrent layers and the readout, not a "
            "convolutional input stage, whose parameters would get no descent direction; "
            "build the network with conv_kernels=() (estimators: conv_kernels=None, which "
            "optimizer='simplex' chooses under conv_kernels='auto')."
        )
    if not states.layers:
        raise ValueError(
            "states must come from network.forward_states(x, lengths), which keeps every "
            "layer's states; got NetworkStates without them."
        )
    hidden = states.hidden
    batch, steps, _ = hidden.shape
    lengths, ragged = _check_lengths(lengths, batch, steps, hidden.device, ran_with=states.lengths)
    if loss.ndim != 0:
        raise ValueError(
            f"loss must be a scalar; got a tensor of shape {tuple(loss.shape)}. Reduce it "
            "(for example with .mean() or a weighted sum) first."
        )
    if loss_scale is not None and not (math.isfinite(loss_scale) and loss_scale > 0):
        raise ValueError(
            f"loss_scale must be a positive finite float (a GradScaler's get_scale()); "
            f"got {loss_scale!r}."
        )
    if not states.projected.requires_grad:
        raise ValueError(
            "states.projected does not require grad: run network.forward_states with "
            "autograd enabled (not under torch.no_grad() or torch.inference_mode())."
        )
    every_step = states.outputs.ndim == 3
    initial = [state for layer in states.layers for state in layer.initial]  # (B, H) each
    n_layers = len(states.layers)
    reached = [*(layer.projected for layer in states.layers), states.outputs]
    if not loss.requires_grad:
        _refuse_unreached_loss("a loss without a gradient (computed under torch.no_grad(), or detached)")
    # The readout's weight too, when it trains: a loss computed from another network's
    # states (a copy of this one, say) does not reach it, and this network's parameters
    # would silently be given that network's gradients.
    readout = [network.readout.weight] if network.readout.weight.requires_grad else []
    try:
        grads = list(torch.autograd.grad(
            loss, [*reached, *initial, *readout], allow_unused=True
        ))  # (B, T, G * H) per layer, (B, k) or (B, T, k), (B, H) per initial state; None: unused
    except RuntimeError as error:
        if "backward through the graph a second time" not in str(error):
            raise
        raise RuntimeError(
            "the graph of these states was already used by a backward pass (loss.backward(), "
            "or an earlier temporal_gradients of them): temporal_gradients replaces "
            "loss.backward() (it fills .grad itself). Drop the backward() call, or run "
            "forward_states again for each call."
        ) from error
    reaches_readout = not readout or grads.pop() is not None
    names = [f"states.layers[{depth}].projected" for depth in range(n_layers)] + ["states.outputs"]
    unused = [name for name, grad in zip(names, grads) if grad is None]
    if unused:
        _refuse_unreached_loss(f"a loss that does not depend on {' or '.join(unused)}")
    if not reaches_readout:
        raise ValueError(
            "states must come from network.forward_states of the network given to "
            f"temporal_gradients; the loss does not reach this {type(network).__name__}'s "
            "readout, so they came from another network (a copy of this one?), whose "
            "gradients this network's parameters would silently be given. Pass the "
            "network that computed the states."
        )
    # Only an initial state may go unused by the loss; its gradient is then zero.
    grads = tuple(
        torch.zeros_like(target) if grad is None else grad for target, grad in zip([*reached, *initial], grads)
    )
    if loss_scale is not None:
        # Unscaled in the parameters' dtype: float16 deltas times 1/scale could underflow.
        dtype = network.readout.weight.dtype
        grads = tuple(g.to(dtype) / loss_scale for g in grads)
        loss = loss / loss_scale

    result = _from_gradients(network, states, grads, lengths, ragged, loss)
    if not result.parameters:
        raise ValueError(
            f"every parameter of this {type(network).__name__} is frozen (requires_grad=False), "
            "so there is nothing to give temporal gradients to; unfreeze the parameters to "
            "train (`parameter.requires_grad_(True)`)."
        )
    if accumulate_grad:
        with torch.no_grad():
            for p, g in zip(result.parameters, result.gradient):
                if loss_scale is not None:
                    g = g * loss_scale  # as backward() of the scaled loss fills .grad
                if p.grad is None:
                    p.grad = g.detach().clone()
                else:
                    p.grad.add_(g)
    return result


def _refuse_unreached_loss(got: str) -> None:
    """Raise the error for a loss that does not reach the given states (``got`` says
    how), whose temporal gradients would silently be zero."""
    raise ValueError(
        "loss must be computed from states.outputs, the outputs of the states given to "
        f"temporal_gradients; got {got}, whose temporal gradients would silently be zero. "
        "Compute the loss from those same states: "
        "`states = network.forward_states(x, lengths)`, then `loss = criterion(states.outputs, y)` "
        "(not from another forward pass such as network(x, lengths), nor from detached outputs)."
    )


def _from_gradients(
    network: RecurrentNetwork | RecurrentAdapter,
    states: NetworkStates,
    grads: tuple[torch.Tensor, ...],
    lengths: torch.Tensor,
    ragged: bool,
    loss: torch.Tensor,
) -> TemporalGradients:
    """The temporal gradients from the gradients of the loss: of every layer's
    ``projected``, of ``states.outputs`` and of every learned initial state, in that
    order (what :func:`temporal_gradients` asks autograd for). ``lengths`` are checked
    (``ragged``: some is below the padded length), ``loss`` unscaled."""
    every_step = states.outputs.ndim == 3
    params, layers = _gather_layers(network, states, grads, lengths, ragged, models=1)
    steps = states.hidden.shape[1]
    positions = torch.arange(steps, device=states.hidden.device)  # (T,)
    if every_step:
        counts = (lengths[None, :] > positions[:, None]).sum(1)  # (T,)
    else:
        counts = (lengths[None, :] >= steps - positions[:, None]).sum(1)  # (T,)
    return TemporalGradients(
        parameters=tuple(params.parameters),
        names=tuple(params.names),
        layers=tuple(layers),
        steps=steps,
        alignment="absolute" if every_step else "last",
        counts=counts,
        loss=loss.detach(),
        network=network,
    )


def _gather_layers(
    network: RecurrentNetwork | RecurrentAdapter,
    states: NetworkStates,
    grads: tuple[torch.Tensor, ...],
    lengths: torch.Tensor,
    ragged: bool,
    *,
    models: int,
    stacked: dict[int, torch.Tensor] | None = None,
) -> tuple[_Parameters, list[_Layer]]:
    """The parameters and the layer records of temporal gradients (``lengths`` and
    ``ragged`` from :func:`_check_lengths`).

    ``models > 1``: ``states``, ``grads`` and ``lengths`` hold ``models`` networks of
    ``network``'s architecture side by side along the batch (model-major: the batch of
    network ``m`` is rows ``m * B`` to ``(m + 1) * B``), and ``stacked`` maps each of
    ``network``'s parameters (by ``id``) to the networks' values, ``(models, *shape)``.
    The layers' rows are then folded model-major: row ``m * steps + s`` is aligned step
    ``s`` of network ``m`` (see :class:`_StackedTemporalGradients`).
    """
    hidden = states.hidden
    steps = hidden.shape[1]
    every_step = states.outputs.ndim == 3
    n_layers = len(states.layers)
    stack = _layer_parameters(network)
    align = _Aligner(lengths, steps, every_step, ragged)
    params = _Parameters()
    layers: list[_Layer] = []
    for depth, ((cell, parameters), layer_states, delta) in enumerate(zip(stack, states.layers, grads[:n_layers])):
        recurrent = None if stacked is None else _stacked_recurrent_deltas(cell, parameters, stacked, models)
        layers += _cell_layers(params, depth, cell, parameters, layer_states, delta.detach(), align, recurrent)
    output_delta = grads[n_layers].detach()
    time_major = isinstance(network, RecurrentAdapter) and not network.rnn.batch_first
    if every_step and time_major:
        output_delta = output_delta.transpose(0, 1)  # (B, T, k), as the states
    if every_step and ragged:  # one read on the host
        _check_padding_unweighted(output_delta, grads[:n_layers], lengths, time_major=time_major)
    learned = _initial_layers(params, network, grads[n_layers + 1 :], states, align, models)
    readout = _readout_layer(params, network, output_delta, states.readout_inputs.detach(), align)
    if models > 1:
        layers = [_fold(layer, models, steps) for layer in layers]
        readout = None if readout is None else _fold(readout, models, steps)
    layers += [layer for layer in (*learned, readout) if layer is not None]
    return params, layers


def _check_padding_unweighted(
    output_delta: torch.Tensor, layer_deltas: Sequence[torch.Tensor], lengths: torch.Tensor, *, time_major: bool
) -> None:
    """Refuse a loss at every step whose gradient is finite and nonzero at a padded step
    (past a sequence's length), in one read on the host: at the outputs ``output_delta``
    ``(B, T, k)``, or at a layer's pre-activations ``(B, T, .)``, which a loss built
    from the outputs at valid steps leaves at zero
    (nothing reads a padded step's state, and the recurrence passes gradients back in
    time only). Aligning the steps drops padded rows, so what such a loss put there
    would be missing from the temporal gradients but not from what it sent back into
    the valid steps: their sum would not be the gradient. A NaN or an infinity there
    makes the gradient non-finite, which the optimizers skip."""
    deltas = [output_delta] + [delta.detach() for delta in layer_deltas]
    positions = torch.arange(deltas[0].shape[1], device=deltas[0].device)
    padded = (positions[None, :] >= lengths[:, None])  # (B, T)
    weighted = [(padded[:, :, None] & (delta != 0) & torch.isfinite(delta)).any(2) for delta in deltas]  # (B, T) each
    found = torch.stack([w.any() for w in weighted]).tolist()
    if not any(found):
        return
    which = found.index(True)
    rows = weighted[which].nonzero()  # (n, 2): sequence, step
    sequence, step = (int(v) for v in rows[0].tolist())
    where = (f"step {step} of sequence {sequence}, whose length is {int(lengths[sequence])}")
    if which == 0:
        # The mask in the layout of the outputs: a time-major module's are (steps, batch, k).
        mask, layout = (
            ("torch.arange(steps)[:, None] < lengths[None, :]", "(steps, batch)") if time_major
            else ("torch.arange(steps)[None, :] < lengths[:, None]", "(batch, steps)")
        )
        raise ValueError(
            f"the loss at every step must give the padded steps (past each sequence's length) zero "
            f"weight; got a loss whose gradient is nonzero at {rows.shape[0]} padded steps (the first: "
            f"{where}). What it puts there would reach the valid steps' temporal gradients through "
            f"the recurrence. Mask it with the lengths: `valid = {mask}`, then "
            "`loss = (per_step * valid).sum() / valid.sum()` with the per-step losses `per_step` "
            f"of shape {layout}."
        )
    layer = which - 1
    raise ValueError(
        f"the loss reaches the states of padded steps (past each sequence's length): its gradient "
        f"is nonzero at {rows.shape[0]} padded steps of layer {layer} (the first: {where}). Temporal "
        "gradients keep the valid steps only, so they would not add up to the gradient. Compute the "
        "loss from states.outputs at valid steps only (a penalty on states.hidden masked with the "
        "lengths), and pass the lengths given to forward_states."
    )


class _Parameters:
    """The trainable parameters met so far, their names and indices (frozen ones skipped)."""

    def __init__(self) -> None:
        self.parameters: list[torch.nn.Parameter] = []
        self.names: list[str] = []

    def add(self, name: str, parameter: torch.Tensor | None) -> int | None:
        if parameter is None or not parameter.requires_grad:
            return None
        for other, known in zip(self.names, self.parameters):
            if known is parameter:  # tied weights: SimplexSGD's step kept the last block only
                raise ValueError(
                    f"one tensor plays two parts in the network, {other} and {name} (tied weights): "
                    "temporal gradients give each part a block of its own, which a step cannot "
                    "apply to one tensor. Untie them (a parameter per layer), or train with "
                    "loss.backward() and another optimizer."
                )
        self.parameters.append(parameter)  # type: ignore[arg-type]
        self.names.append(name)
        return len(self.parameters) - 1


class _Aligner:
    """Puts time-major ``(T, B, .)`` tensors on aligned steps and zeroes invalid rows.

    Last-step losses: sequence ``b`` is shifted so that its last valid step is the last
    row (right-alignment). Every-step losses: absolute positions, rows past a
    sequence's end zeroed. Either way padded rows hold zeros, never the padding's values
    (NaN included), so that a zero delta times them stays zero. ``ragged``: some
    length is below ``steps`` (otherwise there is nothing to move or zero).
    """

    def __init__(self, lengths: torch.Tensor, steps: int, every_step: bool, ragged: bool) -> None:
        self.lengths, self.steps, self.every_step, self.ragged = lengths, steps, every_step, ragged

    def __call__(self, *tensors: torch.Tensor) -> tuple[torch.Tensor, ...]:
        if not self.ragged:
            return tensors
        if not self.every_step:
            return _right_align(tensors, self.lengths)
        positions = torch.arange(self.steps, device=self.lengths.device)
        valid = (positions[:, None] < self.lengths[None, :])[:, :, None]  # (T, B, 1)
        return tuple(torch.where(valid, t, 0.0) for t in tensors)  # (T, B, .) each

    def first_rows(self) -> torch.Tensor:
        """The aligned step of each sequence's first step, ``(B,)``."""
        if self.every_step:
            return torch.zeros_like(self.lengths)
        return self.steps - self.lengths


def _layer_parameters(
    network: RecurrentNetwork | RecurrentAdapter,
) -> list[tuple[Cell, dict[str, torch.Tensor | None]]]:
    """The cell and ``W_rec``, ``b_rec``, ``W_in``, ``b`` of every layer, bottom first.

    ``b_rec`` is the recurrent bias ``b_hh``: the package's network has one where the
    cell keeps one (the GRU); a PyTorch module with biases has one for every cell.
    """
    if isinstance(network, RecurrentAdapter):
        return [(network.cell_spec, parameters) for parameters in network.layer_parameters()]
    return [
        (
            cell,
            {
                "W_rec": cell.recurrent_weight(recurrence),
                "b_rec": cell.recurrent_bias(recurrence),
                "W_in": projection.weight,
                "b": projection.bias,
            },
        )
        for cell, projection, recurrence in network.stack()
    ]


def _cell_layers(
    params: _Parameters,
    depth: int,
    cell: Cell,
    parameters: dict[str, torch.Tensor | None],
    states: Any,
    delta: torch.Tensor,
    align: _Aligner,
    recurrent_deltas: Callable[..., torch.Tensor | None] | None = None,
) -> list[_Layer]:
    """One layer's ``[W_rec | b_rec]`` and ``[W_in | b]`` with inputs ``[h_{t-1}; 1]``, ``[z_t; 1]``.

    For the Elman cells and the LSTM both share the delta ``dL/du`` and form one
    ``[W_rec | b_rec | W_in | b]`` (a ``b_rec`` there adds to ``u`` as ``b`` does); the
    GRU's recurrent delta differs (the cell's ``recurrent_deltas``; stacked networks
    pass their own ``recurrent_deltas``, which reads each network's ``W_rec``).
    """
    suffix = "" if depth == 0 else f"[{depth}]"
    weight_hh, bias_hh = parameters["W_rec"], parameters["b_rec"]
    assert weight_hh is not None  # every layer has a recurrent matrix
    # Everything in the parameters' type: under autocast states may be lower precision.
    dtype = weight_hh.dtype
    delta = delta.to(dtype).transpose(0, 1).contiguous()  # (T, B, G * H)
    hidden = states.hidden.detach().to(dtype).transpose(0, 1)  # (T, B, H)
    if states.initial:
        first = states.initial[0].detach().to(dtype)[None]  # (1, B, H): h_0
    else:
        first = hidden.new_zeros(1, *hidden.shape[1:])  # (1, B, H): h_0 = 0
    previous = torch.cat([first, hidden[:-1]])  # (T, B, H): h_{t-1}
    inputs = states.inputs.detach().to(dtype).transpose(0, 1)  # (T, B, n)
    w_rec = params.add("W_rec" + suffix, weight_hh)
    b_rec = params.add("b_rec" + suffix, bias_hh)
    w_in = params.add("W_in" + suffix, parameters["W_in"])
    bias = params.add("b" + suffix, parameters["b"])
    compute = cell.recurrent_deltas if recurrent_deltas is None else recurrent_deltas
    recurrent = compute(delta, states, previous, weight_hh, bias_hh)  # (T, B, G * H)
    if recurrent is not None:
        delta, recurrent, inputs, previous = align(delta, recurrent, inputs, previous)
        gated = _layer(recurrent, [(w_rec, previous), (b_rec, None)])
        projected_part = _layer(delta, [(w_in, inputs), (bias, None)])
        return [layer for layer in (gated, projected_part) if layer is not None]
    delta, inputs, previous = align(delta, inputs, previous)
    layer = _layer(delta, [(w_rec, previous), (b_rec, None), (w_in, inputs), (bias, None)])
    return [] if layer is None else [layer]


def _materialize_cheap(layers: Sequence[_Layer]) -> None:
    """Keep the per-(sequence, step) outer products of the layers where they are cheaper
    than Gram matrices: they cost ``m * n`` per (sequence, step), Gram matrices
    ``B * (m + n)``; and only within the memory bound."""
    for layer in layers:
        batch, m = layer.delta.shape[1], layer.delta.shape[2]
        n = layer.width
        if m * n <= batch * (m + n) and layer.delta.shape[0] * m * n <= _CHUNK_ELEMENTS:
            layer.materialize()


def _layer(delta: torch.Tensor, blocks: list[tuple[int | None, torch.Tensor | None]]) -> _Layer | None:
    kept = tuple(_Block(index, inputs) for index, inputs in blocks if index is not None)
    return _Layer(delta, None, kept) if kept else None


def _initial_layers(
    params: _Parameters,
    network: RecurrentNetwork | RecurrentAdapter,
    grads: tuple[torch.Tensor, ...],
    states: NetworkStates,
    align: _Aligner,
    models: int = 1,
) -> list[_Layer | None]:
    """A learned ``h_0`` (and ``c_0``) as a bias of ``layers * H`` at each sequence's first step.

    For ``models`` networks side by side along the batch, the rows are folded
    model-major (row ``m * steps + s``), as :func:`_fold` folds the other layers'."""
    per_layer = len(states.layers[0].initial)
    if per_layer == 0:
        return []
    rows = align.first_rows()  # (M B,)
    if models > 1:
        batch = rows.shape[0] // models
        model = torch.arange(rows.shape[0], device=rows.device) // batch  # (M B,)
        rows = rows + model * align.steps
    result = []
    for slot, (name, parameter) in enumerate([("h_0", network.initial_hidden), ("c_0", network.initial_cell)][:per_layer]):
        index = params.add(name, parameter)
        if index is None:
            continue
        per_sequence = torch.cat([g.detach() for g in grads[slot::per_layer]], dim=1)  # (B, L * H)
        per_sequence = per_sequence.to(parameter.dtype)
        by_step = per_sequence.new_zeros(models * align.steps, per_sequence.shape[1])  # (M T, L * H)
        by_step.index_add_(0, rows, per_sequence)
        result.append(_Layer(by_step[:, None, :], None, (_Block(index, None),)))  # (T, 1, L * H)
    return result


def _right_align(tensors: tuple[torch.Tensor, ...], lengths: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Shift every sequence so that its last valid step is the last row; zero the rest.

    Aligned row ``s`` of sequence ``b`` is its step ``s - (T - L_b)``. The rows before
    a sequence starts are set to zero rather than copied from the padding, whose deltas
    are zero but whose inputs may be anything, NaN included.
    """
    steps, batch = tensors[0].shape[:2]
    device = tensors[0].device
    source = torch.arange(steps, device=device)[:, None] - (steps - lengths)[None, :]  # (T, B)
    # One row gather per tensor over its (T B, .) rows, then the rows before each start
    # zeroed: the same values as indexing (rows, columns) and a select against zero, at
    # a quarter of the time (batch 800, 55 steps, 50 units: 3.6 ms instead of 13 ms).
    flat = (source.clamp(min=0) * batch + torch.arange(batch, device=device)[None, :]).reshape(-1)  # (T B,)
    before = torch.nonzero((source < 0).reshape(-1)).flatten()
    aligned = []
    for t in tensors:
        rows = t.reshape(steps * batch, *t.shape[2:]).index_select(0, flat)
        aligned.append(rows.index_fill_(0, before, 0.0).view(t.shape))
    return tuple(aligned)  # (T, B, .) each


def _readout_layer(
    params: _Parameters,
    network: RecurrentNetwork | RecurrentAdapter,
    output_delta: torch.Tensor,
    read: torch.Tensor,
    align: _Aligner,
) -> _Layer | None:
    """``[W_out | b_out]`` with inputs ``[h_t; 1]`` (after dropout) where the losses sit."""
    w_out = params.add("W_out", network.readout.weight)
    b_out = params.add("b_out", network.readout.bias)
    output_delta = output_delta.to(network.readout.weight.dtype)
    if align.every_step:
        delta = output_delta.transpose(0, 1).contiguous()  # (T, B, k)
        (read,) = align(read.to(delta.dtype).transpose(0, 1))  # (T, B, H)
        rows = None
    else:
        delta = output_delta[None]  # (1, B, k)
        read = read.to(delta.dtype)[None]  # (1, B, H)
        # The single readout sits at the last aligned step; its index is filled on the
        # device (one copied from host memory would wait for the queued backward pass).
        rows = torch.full((1,), align.steps - 1, device=delta.device)
    blocks = tuple(
        _Block(index, inputs) for index, inputs in ((w_out, read), (b_out, None)) if index is not None
    )
    return _Layer(delta, rows, blocks) if blocks else None


def _block_outer(delta: torch.Tensor, block: _Block) -> torch.Tensor:
    """Per-row gradient of one block: ``(S - offset, m, n)``, or ``(S, m)`` for a bias."""
    if block.inputs is None:
        return delta.sum(1)  # (S, m)
    return _outer(delta[block.offset :], block.inputs)


def _outer(delta: torch.Tensor, inputs: torch.Tensor) -> torch.Tensor:
    """``delta_s^T z_s`` for every row ``s``: ``(S, B, m)``, ``(S, B, n)`` to ``(S, m, n)``.

    Computed as ``(z_s^T delta_s)^T`` (a transposed view of ``(S, n, m)`` memory): with
    ``n`` the narrow side (6 input features, say) the batched product is several times
    faster that way round on a CPU (batch 100, 200 gate rows: 0.5 ms instead of 3 ms).
    """
    return torch.bmm(inputs.transpose(1, 2), delta).transpose(1, 2)


def _weighted_sum(coefficients: torch.Tensor | None, outer: torch.Tensor) -> torch.Tensor:
    """``sum_s c_s outer_s`` (all ``c_s = 1`` for None), reading ``outer`` in its memory order.

    A transposed ``outer`` (see :func:`_outer`) is reduced as the contiguous
    ``(S, n, m)`` it is: several times faster than a strided reduction.
    """
    transposed = outer.ndim == 3 and outer.transpose(1, 2).is_contiguous()
    memory = outer.transpose(1, 2) if transposed else outer
    total = memory.sum(0) if coefficients is None else torch.tensordot(coefficients, memory, dims=1)
    return total.T if transposed else total


def _rows(layer: _Layer, device: torch.device) -> torch.Tensor:
    if layer.rows is None:
        return torch.arange(layer.delta.shape[0], device=device)
    return layer.rows


def _layer_squares(layer: _Layer, method: NormMethod) -> torch.Tensor:
    """Squared norm of every row's gradient over all the layer's blocks, ``(S,)``, in the
    deltas' dtype, at least float32 (:func:`~sklearn_rnn.optim._functional._working_dtype`)."""
    if method == "auto":
        batch, m = layer.delta.shape[1:]
        n = layer.width
        direct = layer.outer is not None or m * n <= batch * (m + n)
        method = "direct" if direct else "gram"
    if method == "direct":
        return torch.stack(_block_squares(layer)).sum(0)
    return _gram_squares(layer)


def _block_squares(layer: _Layer) -> list[torch.Tensor]:
    """Squared norm of every row's gradient, block by block: one ``(S,)`` tensor each.

    The per-row gradients are formed in the deltas' dtype, and their squares taken in at
    least float32 (float16 squares underflow below about 2.4e-4).
    """
    delta = layer.delta  # (S, B, m)
    rows = delta.shape[0]
    work = _working_dtype(delta.dtype)
    if layer.outer is not None:
        result = []
        for block, outer in zip(layer.blocks, layer.outer):
            dims = tuple(range(1, outer.ndim))
            norms = torch.linalg.vector_norm(outer, dim=dims, dtype=None if outer.dtype == work else work)
            squares = norms.square()  # (S',)
            result.append(torch.cat([squares.new_zeros(block.offset), squares]))
        return result
    result = [delta.new_zeros(rows, dtype=work) for _ in layer.blocks]
    chunk = max(1, _CHUNK_ELEMENTS // (delta.shape[2] * layer.width))
    for lo in range(0, rows, chunk):
        hi = min(rows, lo + chunk)
        for squares, block in zip(result, layer.blocks):
            if block.inputs is None:
                squares[lo:hi] = delta[lo:hi].sum(1).to(work).square().sum(1)
                continue
            start = max(lo, block.offset)
            if start < hi:
                z = block.inputs[start - block.offset : hi - block.offset]  # (c, B, n)
                outer = _outer(delta[start:hi], z)  # (c, m, n)
                squares[start:hi] = outer.to(work).square().sum((1, 2))
    return result


def _gram_squares(layer: _Layer) -> torch.Tensor:
    """``sum_{b,b'} (d_b . d_b') (z_b . z_b')`` per row, in chunks of rows, ``(S,)``, in
    the deltas' dtype, at least float32 (float16 products underflow).

    Where the batch's terms of a row nearly cancel (near-identical inputs with opposite
    residuals), the sum's rounding is of the order of the terms, not of the sum: a row
    whose sum is below ``sqrt(eps)`` times ``(sum_b |d_b| |z_b|)^2``, its terms' scale,
    is recomputed directly (:func:`_direct_row_squares`), which keeps it to about
    ``sqrt(eps)`` relative (a float32 norm was 6 times too large). Such rows are rare:
    the check reads one flag on the host per call.
    """
    delta = layer.delta  # (S, B, m)
    rows, batch, _ = delta.shape
    work = _working_dtype(delta.dtype)
    chunk = max(1, _CHUNK_ELEMENTS // max(1, batch * batch))  # an empty batch: zero norms
    pieces, cancelled = [], []
    for lo in range(0, rows, chunk):
        hi = min(rows, lo + chunk)
        kernel = delta.new_zeros(hi - lo, batch, batch, dtype=work)  # (c, B, B): z_b . z_b'
        for block in layer.blocks:
            if block.inputs is None:
                kernel += 1.0
                continue
            start = max(lo, block.offset)
            if start < hi:
                z = block.inputs[start - block.offset : hi - block.offset].to(work)  # (c', B, n)
                kernel[start - lo :] += torch.bmm(z, z.transpose(1, 2))
        d = delta[lo:hi].to(work)  # (c, B, m)
        products = torch.bmm(d, d.transpose(1, 2))  # (c, B, B): d_b . d_b'
        total = (products * kernel).sum((1, 2))  # (c,)
        scale = (products.diagonal(dim1=1, dim2=2) * kernel.diagonal(dim1=1, dim2=2)).sqrt().sum(1)  # (c,)
        cancelled.append(total < math.sqrt(torch.finfo(work).eps) * scale.square())
        pieces.append(total.clamp(min=0))
    squares = torch.cat(pieces) if pieces else delta.new_zeros(0, dtype=work)
    if cancelled:
        flagged = torch.cat(cancelled)
        if bool(flagged.any()):
            index = flagged.nonzero().flatten()
            squares[index] = _direct_row_squares(layer, index)
    return squares


def _direct_row_squares(layer: _Layer, index: torch.Tensor) -> torch.Tensor:
    """Squared norm of the gradient of the layer's rows ``index`` over all its blocks,
    formed directly (``sum_b d_b z_b^T``), ``(len(index),)``, as :func:`_gram_squares`
    gives them."""
    delta = layer.delta[index]  # (k, B, m)
    work = _working_dtype(delta.dtype)
    squares = delta.new_zeros(index.shape[0], dtype=work)
    for block in layer.blocks:
        if block.inputs is None:
            squares += delta.sum(1).to(work).square().sum(1)
            continue
        reached = index >= block.offset  # (k,): rows the block's inputs cover
        z = block.inputs[index[reached] - block.offset]  # (k', B, n)
        squares[reached] += _outer(delta[reached], z).to(work).square().sum((1, 2))
    return squares


def _rescued_norms(
    layers: Sequence[_Layer], norms: torch.Tensor, squares_of: Callable[[_Layer], torch.Tensor]
) -> torch.Tensor:
    """``norms``, the per-step norms of ``layers`` ``(steps,)`` (or ``(steps, k)``: ``k``
    norms per step, such as one per block), with the non-finite ones recomputed without
    overflow (infinite where squares overflowed, NaN where the Gram method's products did
    with both signs): in float64, by ``squares_of`` (a layer's squared norms per row,
    ``(S,)`` or ``(S, k)``, as ``norms`` reads them) on each row's deltas (and kept
    per-row gradients) divided by their largest magnitude, the rows of a step then
    weighted by their magnitude relative to the step's largest. Finite where every entry
    is and the norm is within the dtype's range; a step with an infinite or NaN entry
    keeps a non-finite norm. The finite norms are returned as they are."""
    device = norms.device
    scales = []
    for layer in layers:
        largest = layer.delta.abs().amax((1, 2)).double()  # (S,)
        scales.append(torch.where(torch.isfinite(largest) & (largest > 0), largest, torch.ones_like(largest)))
    common = torch.zeros(norms.shape[0], dtype=torch.float64, device=device)  # (T,): each step's largest
    for layer, scale in zip(layers, scales):
        common.scatter_reduce_(0, _rows(layer, device), scale, "amax")
    squares = torch.zeros(norms.shape, dtype=torch.float64, device=device)  # (T,) or (T, k)
    trailing = [1] * (norms.ndim - 1)  # a step's weight over its k norms
    for layer, scale in zip(layers, scales):
        blocks = tuple(
            _Block(b.index, None if b.inputs is None else b.inputs.double(), b.offset) for b in layer.blocks
        )
        outer = None
        if layer.outer is not None:
            outer = tuple(
                o.double() / scale[b.offset :].view(-1, *[1] * (o.ndim - 1))
                for b, o in zip(layer.blocks, layer.outer)
            )
        wide = _Layer(layer.delta.double() / scale[:, None, None], layer.rows, blocks, outer)
        relative = scale / common[_rows(layer, device)]  # (S,): at most 1
        _scatter_add(squares, layer.rows, squares_of(wide) * relative.square().view(-1, *trailing))
    rescued = (squares.sqrt() * common.view(-1, *trailing)).to(norms.dtype)
    return torch.where(torch.isfinite(norms), norms, rescued)


def _scatter_add(target: torch.Tensor, rows: torch.Tensor | None, values: torch.Tensor) -> None:
    if rows is None:
        target += values
    else:
        target.index_add_(0, rows, values)


def _check_lengths(
    lengths: torch.Tensor, batch: int, steps: int, device: torch.device, *, ran_with: torch.Tensor | None = None
) -> tuple[torch.Tensor, bool]:
    """The lengths as int64 on ``device``, and whether any is below ``steps`` (a ragged
    batch), from one read of their extremes on the host (each read makes a GPU's host
    wait for the device); in the same read, whether they are the lengths ``ran_with``
    that the forward pass ran with (when known): others silently misalign the steps."""
    # Narrow and unsigned integers as int64: PyTorch has no min or max of unsigned ones.
    lengths = as_lengths(lengths).to(device)
    if lengths.shape != (batch,):
        raise ValueError(
            f"lengths must have shape ({batch},), one per sequence of the batch; got "
            f"{tuple(lengths.shape)}."
        )
    if lengths.dtype.is_floating_point or lengths.dtype == torch.bool:  # .long() truncated them
        raise ValueError(
            f"lengths must hold integers, each sequence's valid steps; got {lengths.tolist()} "
            f"({lengths.dtype}). Pass them as integers."
        )
    if not lengths.numel():
        return lengths.long(), False
    read = [lengths.min(), lengths.max()]
    if ran_with is not None:
        read.append((lengths != ran_with.to(device)).sum())
    shortest, longest, *differing = (int(v) for v in torch.stack(read).tolist())
    if shortest < 1 or longest > steps:
        raise ValueError(
            f"lengths must lie between 1 and the padded length {steps}; got values from "
            f"{shortest} to {longest}."
        )
    if differing and differing[0]:
        raise ValueError(
            f"lengths must be those the states were computed with (network.forward_states(x, "
            f"lengths)); {differing[0]} of the {batch} differ: got {lengths.tolist()}, the pass ran "
            f"with {ran_with.tolist()}. Pass the same lengths to both."
        )
    return lengths.long(), shortest < steps


class _StackedTemporalGradients:
    """The temporal gradients of ``models`` networks of one architecture, side by side.

    Built by :func:`_stacked_from_gradients` for the stacked trainer. Every layer's rows
    are folded model-major: row ``m * steps + s`` holds aligned step ``s`` of network
    ``m``, so that per-step norms come from the same per-row computations as
    :class:`TemporalGradients`' (:func:`_layer_squares`), and combinations are one
    batched matrix product per block over the models. Results carry a leading model
    axis: :meth:`norms` ``(models, steps)``, :meth:`combine` one ``(models, *shape)``
    block per parameter, in the order of :attr:`parameters` (the template network's).
    """

    def __init__(self, parameters: tuple[torch.Tensor, ...], layers: tuple[_Layer, ...], models: int, steps: int) -> None:
        self.parameters = parameters
        self.models = models
        self.steps = steps
        self._layers = layers
        _materialize_cheap(layers)
        self.gradient = self.combine(None)

    def norms(self, rescue: bool = True) -> torch.Tensor:
        """Norm of each network's step gradient over all its blocks, ``(models, steps)``;
        where the squares overflow, recomputed as :meth:`TemporalGradients.norms` does
        (``rescue=False``: as computed, without reading on the host whether they did)."""
        reference = self._layers[0].delta
        squares = reference.new_zeros(self.models * self.steps, dtype=_working_dtype(reference.dtype))  # (M T,)
        for layer in self._layers:
            _scatter_add(squares, layer.rows, _layer_squares(layer, "auto"))
        norms = squares.sqrt()  # (M T,)
        if rescue and _overflowed(norms):
            norms = _rescued_norms(self._layers, norms, lambda wide: _layer_squares(wide, "auto"))
        return norms.view(self.models, self.steps)

    def combine(self, coefficients: torch.Tensor | None) -> tuple[torch.Tensor, ...]:
        """``sum_t c_{m,t} G_{m,t}`` for every network ``m``; None weights every step by one.

        Parameters
        ----------
        coefficients : torch.Tensor of shape (models, steps) or None

        Returns
        -------
        tuple of torch.Tensor
            One ``(models, *shape)`` block per parameter.
        """
        models = self.models
        flat = None if coefficients is None else coefficients.reshape(-1)  # (M T,)
        blocks: dict[int, torch.Tensor] = {}
        for layer in self._layers:
            delta = layer.delta  # (M S, B, m): S rows per network
            c = None
            if flat is not None:
                c = flat.to(delta)
                c = c if layer.rows is None else c[layer.rows]  # (M S,)
            if layer.outer is not None:
                for block, outer in zip(layer.blocks, layer.outer):
                    blocks[block.index] = _model_weighted_sum(c, outer, models)
                continue
            if c is not None:
                delta = delta * c[:, None, None]
            m = delta.shape[2]
            per_model = delta.reshape(models, -1, m)  # (M, S B, m)
            for block in layer.blocks:
                if block.inputs is None:
                    blocks[block.index] = per_model.sum(1)  # (M, m)
                else:
                    inputs = block.inputs.reshape(models, -1, block.inputs.shape[2])  # (M, S B, n)
                    blocks[block.index] = torch.bmm(per_model.transpose(1, 2), inputs)  # (M, m, n)
        return tuple(blocks[i].reshape(models, *p.shape) for i, p in enumerate(self.parameters))


def _model_weighted_sum(coefficients: torch.Tensor | None, outer: torch.Tensor, models: int) -> torch.Tensor:
    """:func:`_weighted_sum` of each network's rows (model-major, ``(M S, ...)``), ``(M, ...)``."""
    transposed = outer.ndim == 3 and outer.transpose(1, 2).is_contiguous()
    memory = outer.transpose(1, 2) if transposed else outer
    per_model = memory.reshape(models, -1, math.prod(memory.shape[1:]))  # (M, S, size)
    if coefficients is None:
        total = per_model.sum(1)
    else:
        total = torch.bmm(coefficients.view(models, 1, -1), per_model)[:, 0]  # (M, size)
    total = total.view(models, *memory.shape[1:])
    return total.transpose(1, 2) if transposed else total


def _stacked_from_gradients(
    network: RecurrentNetwork,
    states: NetworkStates,
    grads: tuple[torch.Tensor, ...],
    lengths: torch.Tensor,
    *,
    models: int,
    stacked: dict[int, torch.Tensor],
) -> _StackedTemporalGradients:
    """Temporal gradients of ``models`` networks of ``network``'s architecture at once.

    ``states``, ``grads`` (as :func:`_from_gradients` takes them) and ``lengths`` hold
    the networks side by side along the batch, model-major, every network with the same
    batch size ``B`` (rows a network does not use hold sequences whose loss weight is
    zero: their deltas are zero, so they add nothing); ``stacked`` maps each parameter
    of ``network`` (by ``id``) to the networks' values ``(models, *shape)``. Only
    last-step losses: aligned step ``steps - 1`` is every network's loss step, and a
    network whose longest sequence has ``L`` steps has zero gradients before aligned
    step ``steps - L``.
    """
    if states.outputs.ndim == 3:
        raise ValueError("stacked temporal gradients need a loss at the last step; got outputs at every step.")
    lengths, ragged = _check_lengths(lengths, states.hidden.shape[0], states.hidden.shape[1], states.hidden.device)
    params, layers = _gather_layers(network, states, grads, lengths, ragged, models=models, stacked=stacked)
    return _StackedTemporalGradients(tuple(params.parameters), tuple(layers), models, states.hidden.shape[1])


def _fold(layer: _Layer, models: int, steps: int) -> _Layer:
    """A layer of ``models`` networks side by side along the batch, ``(S, M B, .)``, with
    its rows folded model-major, ``(M S, B, .)``: row ``m * S + r`` is network ``m``'s
    row ``r``, which lands on aligned step ``m * steps + rows[r]``."""
    rows, batch_models = layer.delta.shape[:2]
    batch = batch_models // models

    def fold(tensor: torch.Tensor) -> torch.Tensor:
        return tensor.reshape(rows, models, batch, tensor.shape[2]).transpose(0, 1).reshape(models * rows, batch, -1)

    if any(block.offset for block in layer.blocks):
        raise ValueError("folding layers of stacked networks needs blocks without a row offset.")
    blocks = tuple(_Block(b.index, None if b.inputs is None else fold(b.inputs)) for b in layer.blocks)
    folded_rows = None
    if layer.rows is not None:
        base = torch.arange(models, device=layer.rows.device)[:, None] * steps  # (M, 1)
        folded_rows = (base + layer.rows[None, :]).reshape(-1)  # (M S,)
    elif rows != steps:
        raise ValueError(f"a layer without row map must have one row per step ({steps}); got {rows}.")
    return _Layer(fold(layer.delta), folded_rows, blocks)


def _stacked_recurrent_deltas(
    cell: Cell, parameters: dict[str, torch.Tensor | None], stacked: dict[int, torch.Tensor], models: int
) -> Callable[..., torch.Tensor | None]:
    """The cell's ``recurrent_deltas`` for networks side by side along the batch: each
    network's slice with its own ``W_rec`` and ``b_rec`` (vectorized over the networks)."""
    if type(cell).recurrent_deltas is Cell.recurrent_deltas:
        return cell.recurrent_deltas  # the recurrent delta is delta itself: no weights read
    weight = stacked[id(parameters["W_rec"])]  # (M, G H, H)
    bias_parameter = parameters["b_rec"]
    bias = None if bias_parameter is None else stacked[id(bias_parameter)]  # (M, G H)

    def one(delta: torch.Tensor, projected: torch.Tensor, previous: torch.Tensor,
            weight_hh: torch.Tensor, bias_hh: torch.Tensor | None) -> torch.Tensor:
        layer = LayerStates(projected, projected, previous, ())
        return cell.recurrent_deltas(delta, layer, previous, weight_hh, bias_hh)

    def compute(delta: torch.Tensor, states: Any, previous: torch.Tensor, *_: Any) -> torch.Tensor:
        steps, batch_models = delta.shape[:2]
        batch = batch_models // models

        def split(tensor: torch.Tensor) -> torch.Tensor:  # (T, M B, .) -> (M, T, B, .)
            return tensor.reshape(steps, models, batch, -1).transpose(0, 1)

        projected = states.projected.reshape(models, batch, steps, -1)  # (M, B, T, G H)
        result = torch.func.vmap(one, in_dims=(0, 0, 0, 0, None if bias is None else 0))(
            split(delta), projected, split(previous), weight, bias
        )  # (M, T, B, G H)
        return result.transpose(0, 1).reshape(steps, batch_models, -1)

    return compute
