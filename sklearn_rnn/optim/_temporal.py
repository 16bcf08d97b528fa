"""Temporal gradients of a :class:`~sklearn_rnn.nn.RecurrentNetwork` in one backward pass.

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
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch

from ..nn._network import NetworkStates, RecurrentNetwork

__all__ = ["TemporalGradients", "temporal_gradients"]

#: Thesis names of the parameters, in the order temporal gradients list them.
PARAMETER_NAMES: tuple[str, ...] = ("W_rec", "W_in", "b", "W_out", "b_out")

# Largest intermediate (in elements) built at once when computing per-step norms; larger
# problems are cut into chunks of steps so that memory stays bounded (64 MiB in float32).
_CHUNK_ELEMENTS = 1 << 24

Alignment = Literal["last", "absolute"]
NormMethod = Literal["auto", "direct", "gram"]


@dataclass(frozen=True)
class _Layer:
    """One affine map whose per-step gradient is ``sum_b delta_{b,s} z_{b,s}^T``.

    ``delta`` is ``(S, B, m)`` and ``inputs`` is ``(S, B, n)``, time-major and already
    aligned; ``steps`` maps the ``S`` rows onto the ``T`` aligned steps (None: the
    identity). ``blocks`` are ``(parameter index, first column, last column + 1, is a
    bias)``: a bias block is one column, stored as a vector.
    """

    delta: torch.Tensor
    inputs: torch.Tensor
    steps: torch.Tensor | None
    blocks: tuple[tuple[int, int, int, bool], ...]


class TemporalGradients:
    """The temporal gradients of one batch, held as deltas and layer inputs.

    Built by :func:`temporal_gradients`; nothing of shape ``(steps, *parameter_shape)``
    is stored. Steps are *aligned* steps (see :func:`temporal_gradients`): index
    ``steps - 1`` is the loss step of every sequence for last-step losses.

    Attributes
    ----------
    parameters : tuple of torch.nn.Parameter
        The trainable parameters covered, in the order ``W_rec, W_in, b, W_out, b_out``
        (frozen ones left out).
    names : tuple of str
        Their thesis names (``'W_rec'``, ``'W_in'``, ``'b'``, ``'W_out'``, ``'b_out'``).
    gradient : tuple of torch.Tensor
        The full gradient of the loss, one block per parameter: the sum of the temporal
        gradients over steps.
    gradient_norm : float
        Its Euclidean norm over all blocks.
    loss : torch.Tensor
        The loss, detached.
    alignment : {'last', 'absolute'}
        How steps of sequences of different lengths line up.
    counts : torch.Tensor of shape (steps,)
        How many sequences contribute to each aligned step.
    steps : int
        Number of aligned steps (the padded length of the batch).
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
    ) -> None:
        self.parameters = parameters
        self.names = names
        self.steps = steps
        self.alignment = alignment
        self.counts = counts
        self.loss = loss
        self._layers = layers
        self._norms: dict[str, torch.Tensor] = {}
        self.gradient = self.combine(None)
        self.gradient_norm = float(
            torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in self.gradient]))
        )

    def __repr__(self) -> str:
        return (
            f"TemporalGradients(steps={self.steps}, alignment={self.alignment!r}, "
            f"parameters={list(self.names)}, gradient_norm={self.gradient_norm:.4g})"
        )

    def norms(self, method: NormMethod = "auto") -> torch.Tensor:
        """Norm of each step's gradient over all parameter blocks together.

        Computed without materializing the per-step gradients: either by batched outer
        products cut in chunks of steps (``'direct'``, cost ``H * (H + d)`` per sequence
        and step) or through Gram matrices,
        ``||sum_b d_b z_b^T||^2 = sum_{b,b'} (d_b . d_b') (z_b . z_b')`` (``'gram'``,
        cost ``batch * (2H + d)``); ``'auto'`` picks the cheaper. The result is cached.

        Parameters
        ----------
        method : {'auto', 'direct', 'gram'}, default='auto'
            How to compute them; all give the same values up to rounding.

        Returns
        -------
        torch.Tensor of shape (steps,)
        """
        if method not in ("auto", "direct", "gram"):
            raise ValueError(f"method must be 'auto', 'direct' or 'gram'; got {method!r}.")
        if method not in self._norms:
            squares = torch.zeros(self.steps, dtype=self.gradient[0].dtype, device=self.gradient[0].device)
            for layer in self._layers:
                _scatter_add(squares, layer.steps, _layer_step_squares(layer, method))
            self._norms[method] = squares.sqrt()  # (T,)
        return self._norms[method]

    def combine(self, coefficients: torch.Tensor | None) -> tuple[torch.Tensor, ...]:
        """``sum_t c_t G_t``, the per-step gradients weighted by ``coefficients``.

        One matrix product per layer on deltas pre-scaled by their step's coefficient;
        the per-step gradients are never materialized. With
        ``c = beta * normalization_factors(self.norms())`` this is eq. 3.4.

        Parameters
        ----------
        coefficients : torch.Tensor of shape (steps,) or None
            One coefficient per aligned step; None weights every step by one (the full
            gradient).

        Returns
        -------
        tuple of torch.Tensor
            One block per parameter, shaped like it.
        """
        if coefficients is not None and coefficients.shape != (self.steps,):
            raise ValueError(
                f"coefficients must have shape ({self.steps},), one per aligned step; got "
                f"{tuple(coefficients.shape)}."
            )
        blocks: list[torch.Tensor | None] = [None] * len(self.parameters)
        for layer in self._layers:
            delta = layer.delta  # (S, B, m)
            if coefficients is not None:
                c = coefficients.to(delta)
                c = c if layer.steps is None else c[layer.steps]  # (S,)
                delta = delta * c[:, None, None]  # (S, B, m)
            m, n = delta.shape[-1], layer.inputs.shape[-1]
            full = delta.reshape(-1, m).T @ layer.inputs.reshape(-1, n)  # (m, n)
            for index, start, stop, bias in layer.blocks:
                blocks[index] = full[:, start].contiguous() if bias else full[:, start:stop].contiguous()
        return tuple(b for b in blocks if b is not None)

    def cosines(self) -> torch.Tensor:
        """Cosine between each step's gradient and the full gradient (figures 3.2-3.3).

        ``G_t . G = sum_b delta_{b,t} . (G z_{b,t})``: one batched product per layer.
        Steps with a zero gradient get NaN.

        Returns
        -------
        torch.Tensor of shape (steps,)
        """
        dots = torch.zeros(self.steps, dtype=self.gradient[0].dtype, device=self.gradient[0].device)
        for layer in self._layers:
            full = self._layer_matrix(layer, self.gradient)  # (m, n)
            projected = layer.inputs @ full.T  # (S, B, m)
            _scatter_add(dots, layer.steps, (layer.delta * projected).sum((1, 2)))
        return dots / (self.norms() * self.gradient_norm)  # (T,)

    def per_step(self) -> tuple[torch.Tensor, ...]:
        """Materialize every step's gradient: the reference form, for small problems.

        Returns
        -------
        tuple of torch.Tensor
            One block per parameter, of shape ``(steps, *parameter.shape)``; their sum
            over the first axis is :attr:`gradient`.
        """
        blocks: list[torch.Tensor | None] = [None] * len(self.parameters)
        for layer in self._layers:
            per_row = torch.bmm(layer.delta.transpose(1, 2), layer.inputs)  # (S, m, n)
            if layer.steps is not None:
                full = per_row.new_zeros(self.steps, *per_row.shape[1:])  # (T, m, n)
                full[layer.steps] = per_row
                per_row = full
            for index, start, stop, bias in layer.blocks:
                blocks[index] = per_row[:, :, start] if bias else per_row[:, :, start:stop]
        return tuple(b.contiguous() for b in blocks if b is not None)

    def parameter_norms(self) -> dict[str, torch.Tensor]:
        """Per-step norm of each parameter's temporal gradient separately.

        Returns
        -------
        dict of str to torch.Tensor of shape (steps,)
            Keyed by thesis name (``'W_rec'``, ...).
        """
        result: dict[str, torch.Tensor] = {}
        for layer in self._layers:
            squares = _direct_block_squares(layer)  # (S, n_blocks)
            for column, (index, _, _, _) in enumerate(layer.blocks):
                full = squares.new_zeros(self.steps)
                _scatter_add(full, layer.steps, squares[:, column])
                result[self.names[index]] = full.sqrt()
        return {name: result[name] for name in self.names}

    def _layer_matrix(self, layer: _Layer, blocks: tuple[torch.Tensor, ...]) -> torch.Tensor:
        """Reassemble a layer's ``(m, n)`` matrix from parameter-shaped blocks."""
        columns = [blocks[i][:, None] if bias else blocks[i] for i, _, _, bias in layer.blocks]
        return torch.cat(columns, dim=1)


def temporal_gradients(
    network: RecurrentNetwork,
    states: NetworkStates,
    loss: torch.Tensor,
    lengths: torch.Tensor,
    *,
    accumulate_grad: bool = True,
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
    (``alignment='absolute'``); that loss must give padded steps zero weight, since
    whatever it puts there counts. In both cases aligned step 0 has a zero ``W_rec``
    gradient, because ``h_0 = 0``.

    Parameters
    ----------
    network : RecurrentNetwork
        The network that produced ``states``.
    states : NetworkStates
        ``network.forward_states(x, lengths, every_step=...)``, run with autograd on.
    loss : torch.Tensor
        A scalar that depends on the parameters only through ``states`` (a weight
        penalty on the parameters themselves would be missed).
    lengths : torch.Tensor of shape (batch,)
        The lengths given to ``forward_states``.
    accumulate_grad : bool, default=True
        Add the full gradient to each parameter's ``.grad``, as ``loss.backward()``
        would, so that any optimizer can step; False leaves ``.grad`` untouched.

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
    """
    if not isinstance(network, RecurrentNetwork):
        raise TypeError(
            "temporal_gradients needs a sklearn_rnn.nn.RecurrentNetwork (an Elman network "
            f"whose input projection is computed outside the recurrence); got {type(network).__name__}."
        )
    hidden = states.hidden
    batch, steps, _ = hidden.shape
    lengths = _check_lengths(lengths, batch, steps, hidden.device)
    if loss.ndim != 0:
        raise ValueError(
            f"loss must be a scalar; got a tensor of shape {tuple(loss.shape)}. Reduce it "
            "(for example with .mean() or a weighted sum) first."
        )
    if not states.projected.requires_grad:
        raise ValueError(
            "states.projected does not require grad: run network.forward_states with "
            "autograd enabled (not under torch.no_grad()) and with trainable parameters."
        )
    every_step = states.outputs.ndim == 3
    delta, output_delta = torch.autograd.grad(
        loss, [states.projected, states.outputs], allow_unused=True, materialize_grads=True
    )  # (B, T, H), (B, k) or (B, T, k)

    trainable = _trainable(network)
    parameters = tuple(p for p in trainable if p is not None)
    names = tuple(name for name, p in zip(PARAMETER_NAMES, trainable) if p is not None)
    index = {name: i for i, name in enumerate(names)}
    hidden = hidden.detach()
    layers = []
    recurrent = _recurrent_layer(
        trainable[:3], index, delta.detach(), states.inputs.detach().to(hidden.dtype), hidden,
        lengths, align_last=not every_step,
    )
    if recurrent is not None:
        layers.append(recurrent)
    readout = _readout_layer(trainable[3:], index, output_delta.detach(), hidden, lengths, every_step)
    if readout is not None:
        layers.append(readout)

    positions = torch.arange(steps, device=hidden.device)  # (T,)
    if every_step:
        counts = (lengths[None, :] > positions[:, None]).sum(1)  # (T,)
    else:
        counts = (lengths[None, :] >= steps - positions[:, None]).sum(1)  # (T,)
    result = TemporalGradients(
        parameters=parameters,
        names=names,
        layers=tuple(layers),
        steps=steps,
        alignment="absolute" if every_step else "last",
        counts=counts,
        loss=loss.detach(),
    )
    if accumulate_grad:
        with torch.no_grad():
            for p, g in zip(parameters, result.gradient):
                if p.grad is None:
                    p.grad = g.detach().clone()
                else:
                    p.grad.add_(g)
    return result


def _trainable(network: RecurrentNetwork) -> tuple[torch.nn.Parameter | None, ...]:
    """``W_rec, W_in, b, W_out, b_out`` in thesis order, None for a frozen one."""
    candidates = (
        network.recurrent_weight,
        network.input_projection.weight,
        network.input_projection.bias,
        network.readout.weight,
        network.readout.bias,
    )
    return tuple(p if p is not None and p.requires_grad else None for p in candidates)


def _recurrent_layer(
    params: tuple[torch.nn.Parameter | None, ...],
    index: dict[str, int],
    delta: torch.Tensor,
    inputs: torch.Tensor,
    hidden: torch.Tensor,
    lengths: torch.Tensor,
    *,
    align_last: bool,
) -> _Layer | None:
    """``[W_rec | W_in | b]``: deltas and ``z_t = [h_{t-1}; x_t; 1]``, aligned, time-major."""
    batch, steps, _ = hidden.shape
    sources = (
        torch.cat([hidden.new_zeros(batch, 1, hidden.shape[2]), hidden[:, :-1]], dim=1),  # (B, T, H)
        inputs,  # (B, T, d)
        hidden.new_ones(batch, steps, 1),  # (B, T, 1)
    )
    columns, blocks, start = [], [], 0
    for name, param, source in zip(PARAMETER_NAMES[:3], params, sources):
        if param is not None:
            columns.append(source)
            blocks.append((index[name], start, start + source.shape[2], name.startswith("b")))
            start += source.shape[2]
    if not columns:
        return None
    z = torch.cat(columns, dim=2)  # (B, T, n)
    if align_last and bool((lengths < steps).any()):
        # Right-align: aligned step s of sequence b is its step s - (T - L_b); the
        # earlier aligned steps do not exist for it and are masked out (the padding's
        # deltas are zero, but its inputs may be anything, NaN included).
        source_step = torch.arange(steps, device=z.device)[None, :] - (steps - lengths)[:, None]  # (B, T)
        valid = (source_step >= 0)[:, :, None]  # (B, T, 1)
        gather = source_step.clamp(min=0)[:, :, None]  # (B, T, 1)
        delta = torch.where(valid, delta.gather(1, gather.expand(-1, -1, delta.shape[2])), 0.0)
        z = torch.where(valid, z.gather(1, gather.expand(-1, -1, z.shape[2])), 0.0)
    return _Layer(
        delta=delta.transpose(0, 1).contiguous(),  # (T, B, H)
        inputs=z.transpose(0, 1).contiguous(),  # (T, B, n)
        steps=None,
        blocks=tuple(blocks),
    )


def _readout_layer(
    params: tuple[torch.nn.Parameter | None, ...],
    index: dict[str, int],
    output_delta: torch.Tensor,
    hidden: torch.Tensor,
    lengths: torch.Tensor,
    every_step: bool,
) -> _Layer | None:
    """``[W_out | b_out]``: output deltas and ``[h_t; 1]`` where losses sit."""
    batch, steps, _ = hidden.shape
    if every_step:
        read = hidden  # (B, T, H)
        delta = output_delta  # (B, T, k)
        rows = None
    else:
        last = lengths - 1  # (B,)
        read = hidden[torch.arange(batch, device=hidden.device), last][:, None]  # (B, 1, H)
        delta = output_delta[:, None]  # (B, 1, k)
        # The single readout sits at the last aligned step.
        rows = torch.tensor([steps - 1], device=hidden.device)
    sources = (read, hidden.new_ones(*read.shape[:2], 1))
    columns, blocks, start = [], [], 0
    for name, param, source in zip(PARAMETER_NAMES[3:], params, sources):
        if param is not None:
            columns.append(source)
            blocks.append((index[name], start, start + source.shape[2], name.startswith("b")))
            start += source.shape[2]
    if not columns:
        return None
    z = torch.cat(columns, dim=2)  # (B, S, n)
    return _Layer(
        delta=delta.transpose(0, 1).contiguous(),  # (S, B, k)
        inputs=z.transpose(0, 1).contiguous(),  # (S, B, n)
        steps=rows,
        blocks=tuple(blocks),
    )


def _layer_step_squares(layer: _Layer, method: NormMethod) -> torch.Tensor:
    """Squared Frobenius norm of ``sum_b delta_{b,s} z_{b,s}^T`` for every row ``s``."""
    rows, batch, m = layer.delta.shape
    n = layer.inputs.shape[2]
    if method == "auto":
        # Outer products cost m * n per (sequence, step), Gram matrices batch * (m + n).
        method = "direct" if m * n <= batch * (m + n) else "gram"
    if method == "direct":
        return _direct_block_squares(layer).sum(1)
    chunk = max(1, _CHUNK_ELEMENTS // max(1, batch * batch))
    pieces = []
    for lo in range(0, rows, chunk):
        d = layer.delta[lo : lo + chunk]  # (c, B, m)
        z = layer.inputs[lo : lo + chunk]  # (c, B, n)
        gram = torch.bmm(d, d.transpose(1, 2)) * torch.bmm(z, z.transpose(1, 2))  # (c, B, B)
        pieces.append(gram.sum((1, 2)).clamp(min=0))
    return torch.cat(pieces)  # (S,)


def _direct_block_squares(layer: _Layer) -> torch.Tensor:
    """Squared norm of each parameter block of each row's outer-product sum, ``(S, blocks)``."""
    rows, _, m = layer.delta.shape
    n = layer.inputs.shape[2]
    chunk = max(1, _CHUNK_ELEMENTS // max(1, m * n))
    pieces = []
    for lo in range(0, rows, chunk):
        outer = torch.bmm(layer.delta[lo : lo + chunk].transpose(1, 2), layer.inputs[lo : lo + chunk])  # (c, m, n)
        column_squares = outer.square().sum(1)  # (c, n)
        pieces.append(torch.stack([column_squares[:, a:b].sum(1) for _, a, b, _ in layer.blocks], dim=1))
    return torch.cat(pieces)  # (S, blocks)


def _scatter_add(target: torch.Tensor, rows: torch.Tensor | None, values: torch.Tensor) -> None:
    if rows is None:
        target += values
    else:
        target.index_add_(0, rows, values)


def _check_lengths(lengths: torch.Tensor, batch: int, steps: int, device: torch.device) -> torch.Tensor:
    lengths = torch.as_tensor(lengths, device=device)
    if lengths.shape != (batch,):
        raise ValueError(
            f"lengths must have shape ({batch},), one per sequence of the batch; got "
            f"{tuple(lengths.shape)}."
        )
    if lengths.numel() and (int(lengths.min()) < 1 or int(lengths.max()) > steps):
        raise ValueError(
            f"lengths must lie between 1 and the padded length {steps}; got values from "
            f"{int(lengths.min())} to {int(lengths.max())}."
        )
    return lengths.long()
