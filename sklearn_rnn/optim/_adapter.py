"""Temporal gradients for a plain :class:`torch.nn.RNN`, :class:`torch.nn.GRU` or :class:`torch.nn.LSTM`.

:func:`~sklearn_rnn.optim.temporal_gradients` needs, for every layer, the gradient of
``u_t``, the input part of every gate pre-activation. A PyTorch recurrent module
computes ``W_ih x_t + b_ih`` inside its fused kernel, where autograd cannot reach it.
:class:`RecurrentAdapter` runs the module's own parameters (the same tensors, not
copies) through the package's step-by-step recurrence
(:func:`~sklearn_rnn.nn.cells.stepwise_recurrence`): ``u_t`` is computed outside
the recurrence, so one backward pass gives every step's delta. Its
:meth:`~RecurrentAdapter.forward` calls the module itself (the fused kernel), so
prediction costs what the user's model costs.

The mapping onto the thesis' names, layer ``k`` (suffix ``[k]`` above the first):
``W_rec = weight_hh_lk``, ``b_rec = bias_hh_lk``, ``W_in = weight_ih_lk``,
``b = bias_ih_lk``, and ``W_out``, ``b_out`` for the readout. For the Elman cells and
the LSTM, ``b_rec`` adds to ``u_t`` as ``b`` does (the two have the same temporal
gradients); for the GRU it holds the candidate's ``b_hn``, inside the reset gate.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from ..nn._network import NetworkStates, check_lengths, check_tensor, tracked_input
from ..nn.cells import Cell, LayerStates, cell_of_module, stepwise_recurrence
from ..nn.cells._base import _zero_padding, autocast_casts

__all__ = ["RecurrentAdapter"]


class RecurrentAdapter(nn.Module):
    """A PyTorch recurrent module and a linear readout, seen as :func:`temporal_gradients` needs.

    Wraps a :class:`torch.nn.RNN` (``tanh`` or ``relu``), :class:`torch.nn.GRU` or
    :class:`torch.nn.LSTM` (one or more layers, ``batch_first`` or not, with or without
    biases, unidirectional) and a :class:`torch.nn.Linear` readout of its last layer's
    states, at each sequence's last valid step or at every step. The adapter holds the
    very modules it is given, so its parameters *are* theirs: an optimizer built on
    ``model.parameters()`` of a model that holds both modules steps the same tensors.

    * :meth:`forward_states` runs the module's parameters step by step, with each
      layer's input projection outside the recurrence, and returns the
      :class:`~sklearn_rnn.nn.NetworkStates` that :func:`temporal_gradients` reads (the
      same function as the module, up to rounding; dropout between layers, when the
      module has it, is applied when the module is in training mode, as it applies it).
    * :meth:`forward` calls the module itself (its fused kernel) and the readout: for
      prediction and evaluation.

    Sequences are right-padded: sequence ``b`` holds its ``lengths[b]`` valid steps
    first, and padded steps never reach its readout. Both passes read the padded steps
    as zeros, as :class:`~sklearn_rnn.nn.RecurrentNetwork` does: padding filled with
    NaN reaches no output and no gradient (fed to the module as it is, it would make
    every weight's gradient NaN). The initial state is zero. For a relu module,
    :meth:`forward_states` stops each state at its sequence's end (zeros after it, as the
    network's do: run over the padding, an unbounded state may overflow, and a backward
    pass through it reads 0 * inf), while the module's own kernel in :meth:`forward`
    runs on: per-step outputs at padded steps then differ, and no valid step's does.

    Parameters
    ----------
    rnn : torch.nn.RNN, torch.nn.GRU or torch.nn.LSTM
        The recurrent module; not bidirectional, no ``proj_size``.
    readout : torch.nn.Linear
        Maps the last layer's ``hidden_size`` states to the outputs.

    Attributes
    ----------
    cell : {'tanh', 'relu', 'gru', 'lstm'}
        The module's cell, in the package's names.
    cell_spec : sklearn_rnn.nn.Cell
        That cell (the registered cell whose ``torch_mode`` is the module's ``mode``).
    rnn : torch.nn.RNNBase
        The module given.
    readout : torch.nn.Linear
        The readout given.

    See Also
    --------
    temporal_gradients : What :meth:`forward_states` feeds.
    SimplexSGD : The optimizer that consumes temporal gradients.

    Examples
    --------
    >>> import torch
    >>> from sklearn_rnn.optim import RecurrentAdapter, SimplexSGD, temporal_gradients
    >>> gru, head = torch.nn.GRU(3, 8, num_layers=2, batch_first=True), torch.nn.Linear(8, 1)
    >>> net = RecurrentAdapter(gru, head)
    >>> x = torch.randn(4, 6, 3, generator=torch.Generator().manual_seed(0))
    >>> lengths = torch.tensor([6, 5, 3, 1])
    >>> states = net.forward_states(x, lengths)
    >>> tg = temporal_gradients(net, states, states.outputs.square().mean(), lengths)
    >>> tg.names
    ('W_rec', 'b_rec', 'W_in', 'b', 'W_rec[1]', 'b_rec[1]', 'W_in[1]', 'b[1]', 'W_out', 'b_out')
    >>> tg.parameters[0] is gru.weight_hh_l0  # the module's own tensors
    True
    >>> torch.allclose(net(x, lengths), states.outputs, atol=1e-6)  # the fused module
    True
    """

    def __init__(self, rnn: nn.Module, readout: nn.Module) -> None:
        super().__init__()
        if not isinstance(rnn, (nn.RNN, nn.GRU, nn.LSTM)):
            raise TypeError(
                "rnn must be a torch.nn.RNN, torch.nn.GRU or torch.nn.LSTM; got "
                f"{type(rnn).__name__}. For another recurrence, use "
                "sklearn_rnn.nn.RecurrentNetwork or train it with ClippedSGD."
            )
        if rnn.bidirectional:
            raise ValueError(
                "rnn is bidirectional; temporal gradients follow one direction of time. "
                "Use bidirectional=False."
            )
        if getattr(rnn, "proj_size", 0):
            raise ValueError(
                f"rnn has proj_size={rnn.proj_size}; temporal gradients need the LSTM "
                "without a projection of its states. Use proj_size=0."
            )
        from torch.nn.utils import parametrize

        for name, module in (("rnn", rnn), ("readout", readout)):
            if parametrize.is_parametrized(module):  # computed weights: the temporal gradients miss the parameter
                raise ValueError(
                    f"{name} has parametrized weights ({', '.join(module.parametrizations.keys())}, "
                    "e.g. orthogonal or weight_norm): the temporal gradients are those of the "
                    "module's own weight tensors, which here are computed from other parameters "
                    "that would get no gradient. Remove the parametrization "
                    "(torch.nn.utils.parametrize.remove_parametrizations), or train the model "
                    "with loss.backward() and another optimizer."
                )
        if not isinstance(readout, nn.Linear):
            raise TypeError(f"readout must be a torch.nn.Linear; got {type(readout).__name__}.")
        for name, module, weights in (("rnn", rnn, rnn._flat_weights_names),
                                      ("readout", readout, ("weight", "bias"))):
            values = [(weight, getattr(module, weight, None)) for weight in weights]
            computed = [weight for weight, value in values
                        if value is not None and not isinstance(value, nn.Parameter)]
            if computed:  # set by a forward pre-hook from other parameters: prune, weight_norm, spectral_norm
                raise ValueError(
                    f"{name} has weights computed by a hook from other parameters ({', '.join(computed)}: "
                    "torch.nn.utils.prune, weight_norm or spectral_norm): the temporal gradients are "
                    "those of the module's own weight tensors, and the parameters behind them would get "
                    "no gradient. Remove the reparametrization first (prune.remove, remove_weight_norm, "
                    "remove_spectral_norm), or train the model with loss.backward() and another optimizer."
                )
        if readout.in_features != rnn.hidden_size:
            raise ValueError(
                f"readout reads {readout.in_features} features but rnn has hidden_size="
                f"{rnn.hidden_size}; build it as torch.nn.Linear({rnn.hidden_size}, n_outputs)."
            )
        self.rnn = rnn
        self.readout = readout
        self.cell_spec: Cell = cell_of_module(rnn)
        self.cell: str = self.cell_spec.name

    def layer_parameters(self) -> list[dict[str, torch.Tensor | None]]:
        """The module's parameters of each layer, bottom first, in the thesis' names.

        Returns
        -------
        list of dict
            ``{'W_rec': weight_hh_lk, 'b_rec': bias_hh_lk, 'W_in': weight_ih_lk,
            'b': bias_ih_lk}`` per layer ``k``; the biases are None without biases.

        Examples
        --------
        >>> import torch
        >>> from sklearn_rnn.optim import RecurrentAdapter
        >>> lstm = torch.nn.LSTM(3, 4, num_layers=2, bias=False)
        >>> layers = RecurrentAdapter(lstm, torch.nn.Linear(4, 1)).layer_parameters()
        >>> layers[1]["W_in"] is lstm.weight_ih_l1, layers[1]["b"]
        (True, None)
        """
        result = []
        for k in range(self.rnn.num_layers):
            biased = self.rnn.bias
            result.append({
                "W_rec": getattr(self.rnn, f"weight_hh_l{k}"),
                "b_rec": getattr(self.rnn, f"bias_hh_l{k}") if biased else None,
                "W_in": getattr(self.rnn, f"weight_ih_l{k}"),
                "b": getattr(self.rnn, f"bias_ih_l{k}") if biased else None,
            })
        return result

    def forward_states(
        self, x: torch.Tensor, lengths: torch.Tensor, *, every_step: bool = False
    ) -> NetworkStates:
        """Run the module's parameters step by step and keep what temporal gradients need.

        Parameters
        ----------
        x : torch.Tensor
            Right-padded inputs in the module's layout: ``(batch, steps, input_size)``
            when ``batch_first``, else ``(steps, batch, input_size)``.
        lengths : torch.Tensor of shape (batch,)
            Valid steps of each sequence, integers between 1 and ``steps``.
        every_step : bool, default=False
            Read out at every step: ``outputs`` then has the layout of ``x``.

        Returns
        -------
        NetworkStates
            ``outputs`` is ``(batch, output_size)``, or per step in the layout of ``x``;
            the states (``hidden``, ``layers``, ``readout_inputs``) are batch-first.
        """
        z, lengths = self._inputs(x, lengths)  # (B, T, n), (B,)
        z = tracked_input(z, [t for t in self.layer_parameters()[0].values() if t is not None])
        layers: list[LayerStates] = []
        for k, parameters in enumerate(self.layer_parameters()):
            # The wrapped module's mode, as its own forward reads it (model.eval() on a
            # model holding the module does not reach the adapter, which is no child).
            if k > 0 and self.rnn.training and self.rnn.dropout > 0:
                z = F.dropout(z, self.rnn.dropout, training=True)  # as the module does
            w_in, b, w_rec, b_rec = parameters["W_in"], parameters["b"], parameters["W_rec"], parameters["b_rec"]
            assert w_in is not None and w_rec is not None  # every layer has both
            # Where the module's two biases go: both into u (the Elman cells, the LSTM),
            # or b_hh kept apart (the GRU's candidate reads it through the reset gate).
            projected, b_rec = self.cell_spec.project_module_inputs(z, w_in, b, w_rec, b_rec)  # (B, T, G * H)
            # A relu state stopped at each sequence's end, as the network's: run over the
            # zero padding it may overflow, and a backward pass reads 0 * inf there.
            stop = None if self.cell_spec.bounded_state else lengths
            u, hidden, resets = stepwise_recurrence(self.cell_spec, projected, w_rec, b_rec, (), lengths=stop)
            layers.append(LayerStates(z, u, hidden, (), resets))
            z = hidden  # (B, T, H)
        hidden = layers[-1].hidden
        read = hidden if every_step else _last(hidden, lengths)  # (B, T, H) or (B, H)
        outputs = self.readout(read)  # (B, [T,] k)
        if every_step and not self.rnn.batch_first:
            outputs = outputs.transpose(0, 1)  # (T, B, k), the layout of x
        first = layers[0]
        return NetworkStates(first.inputs, first.projected, hidden, outputs, tuple(layers), read, lengths)

    def forward(self, x: torch.Tensor, lengths: torch.Tensor, *, every_step: bool = False) -> torch.Tensor:
        """The readout of the module's own (fused) forward pass.

        Parameters
        ----------
        x : torch.Tensor
            Right-padded inputs in the module's layout.
        lengths : torch.Tensor of shape (batch,)
            Valid steps of each sequence, integers between 1 and ``steps``.
        every_step : bool, default=False
            Read out at every step, in the layout of ``x``.

        Returns
        -------
        torch.Tensor
            ``(batch, output_size)``, or per step in the layout of ``x``.
        """
        z, lengths = self._inputs(x, lengths)  # (B, T, n), (B,)
        output = self.rnn(z if self.rnn.batch_first else z.transpose(0, 1))[0]  # the layout of x
        if every_step:
            return self.readout(output)
        return self.readout(_last(self._batch_major(output), lengths))  # (B, k)

    def _inputs(self, x: torch.Tensor, lengths: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``x`` batch-major with its padded steps zeroed, and ``lengths``, after checking
        that ``x`` is a padded batch of the module's ``input_size`` features (the
        step-by-step path multiplied any width it got) and ``lengths`` its lengths."""
        check_tensor(x, batch_first=self.rnn.batch_first)
        z = self._batch_major(x)  # (B, T, n)
        if z.shape[-1] != self.rnn.input_size:
            layout = "(batch, steps, {})" if self.rnn.batch_first else "(steps, batch, {})"
            raise ValueError(
                f"x has shape {tuple(x.shape)}: expected {layout.format(self.rnn.input_size)}, "
                f"right-padded sequences of the rnn's input_size={self.rnn.input_size} features."
            )
        lengths = check_lengths(lengths, z.shape[0], z.shape[1])  # (B,)
        self._check_dtypes(z)
        return _zero_padding(z, lengths), lengths

    def _check_dtypes(self, z: torch.Tensor) -> None:
        """Refuse an ``x`` or a readout whose dtype differs from the module's weights
        (outside autocast, which casts each operation's inputs): the step-by-step pass
        failed inside a matrix product, where the module's own forward explains itself."""
        if autocast_casts(z, self.rnn.weight_ih_l0.dtype, self.readout.weight.dtype):
            return
        weight = self.rnn.weight_ih_l0.dtype
        if z.dtype != weight:
            other = (f", or the adapter (rnn and readout together) with .to({z.dtype})"
                     if z.is_floating_point() else "")  # an integer adapter cannot run
            raise ValueError(
                f"x has dtype {z.dtype} but the rnn's weights have dtype {weight}; convert "
                f"the input with x.to({weight}){other}."
            )
        if self.readout.weight.dtype != weight:
            raise ValueError(
                f"the readout's weights have dtype {self.readout.weight.dtype} but the rnn's "
                f"{weight}; convert the adapter (rnn and readout together) with .to(dtype)."
            )

    def _batch_major(self, tensor: torch.Tensor) -> torch.Tensor:
        if tensor.ndim != 3:
            raise ValueError(
                "x must be a 3-D padded batch, (batch, steps, features) with batch_first, "
                f"else (steps, batch, features); got shape {tuple(tensor.shape)}."
            )
        return tensor if self.rnn.batch_first else tensor.transpose(0, 1)

    def extra_repr(self) -> str:
        return f"cell={self.cell!r}"


def _last(hidden: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """Each sequence's state at its last valid step: ``(B, T, H)`` to ``(B, H)``
    (``lengths`` checked by :func:`~sklearn_rnn.nn._network.check_lengths`)."""
    last = lengths.to(hidden.device) - 1  # (B,)
    return hidden[torch.arange(hidden.shape[0], device=hidden.device), last]
