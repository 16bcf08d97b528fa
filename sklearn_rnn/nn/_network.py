"""The recurrent network: input projection, recurrence, readout."""

from __future__ import annotations

import contextlib
import contextvars
import math
from collections.abc import Iterator, Sequence
from numbers import Real
from typing import NamedTuple

import numpy as np
import torch
from torch import nn

from ._conv import ConvStage, _widths
from ._lengths import _NARROW_INTEGERS, as_lengths, check_lengths  # noqa: F401  (importable from here, as before)
from .cells import CELLS, Cell, LayerStates, get_cell, normal_, uniform_
from .cells._base import _check_initial_kept, _checked_hidden, _is_int, _zero_padding, autocast_casts
from .cells._stepwise import functorch_transforms_active
from .init import _check_radius

__all__ = ["RecurrentNetwork", "NetworkStates"]

#: How the state before the first step is set: zero, or a learned vector per layer.
HIDDEN_INITS: tuple[str, ...] = ("zero", "learned")

#: What the readout of one output per sequence reads, by name, with its width in units
#: of ``hidden_size``: the last valid state, or that state with the mean and the maximum
#: of the states over the valid steps.
READOUTS: dict[str, int] = {"last": 1, "pool": 3}


class NetworkStates(NamedTuple):
    """Intermediate tensors of one forward pass, for temporal-gradient computations.

    Attributes
    ----------
    inputs : torch.Tensor of shape (batch, steps, input_size)
        The (padded) inputs ``x_t`` (for the 'decay' cell, after the decay of stale
        inputs: what the input projection reads). With a convolutional stage, what the
        first layer reads: the stage's features over the pooled steps,
        ``(batch, ceil(steps / conv_pool), conv output_size)``; ``projected``,
        ``hidden`` and ``lengths`` then count pooled steps too. An empty batch of no
        steps holds one padded step here, as the kernels ran on it.
    projected : torch.Tensor of shape (batch, steps, gates * hidden_size)
        ``u_t = W_in x_t + b`` of the first layer: the input part of each step's
        pre-activations (of every gate). Its gradient is the pre-activation delta of
        each step.
    hidden : torch.Tensor of shape (batch, steps, hidden_size)
        The hidden states ``h_t`` of the last layer; padded steps hold values that no
        output uses (zeros for a cell without a bounded state, which stops there).
    outputs : torch.Tensor
        The readout: ``(batch, output_size)`` at each sequence's last valid step, or
        ``(batch, steps, output_size)`` at every step.
    layers : tuple of LayerStates
        Every layer's inputs, projection, states and learned initial state, bottom
        first (``layers[0].projected`` is ``projected``, ``layers[-1].hidden`` is
        ``hidden``).
    readout_inputs : torch.Tensor or None
        What the readout read, after dropout: the last layer's states at the readout
        steps, ``(batch, hidden_size)`` or ``(batch, steps, hidden_size)``; with
        ``readout='pool'``, the last state beside the mean and the maximum of the
        states, ``(batch, 3 * hidden_size)``.
    lengths : torch.Tensor of shape (batch,) or None
        The valid steps of each sequence that the pass ran with, which temporal
        gradients must be given too.

    Examples
    --------
    >>> import torch
    >>> from sklearn_rnn.nn import RecurrentNetwork
    >>> net = RecurrentNetwork(3, 8, 2, generator=torch.Generator().manual_seed(0))
    >>> states = net.forward_states(torch.randn(4, 5, 3), torch.tensor([5, 3, 2, 1]))
    >>> states.projected.shape, states.hidden.shape, states.outputs.shape
    (torch.Size([4, 5, 8]), torch.Size([4, 5, 8]), torch.Size([4, 2]))
    """

    inputs: torch.Tensor
    projected: torch.Tensor
    hidden: torch.Tensor
    outputs: torch.Tensor
    layers: tuple[LayerStates, ...] = ()
    readout_inputs: torch.Tensor | None = None
    lengths: torch.Tensor | None = None


class RecurrentNetwork(nn.Module):
    """Recurrent network on right-padded variable-length batches: Elman, GRU or LSTM layers.

    The Elman network of the thesis (eq. 1.30-1.34) is ``u_t = W_in x_t + b``,
    ``h_t = f(u_t + W_rec h_{t-1})`` with ``h_0 = 0``, and a linear readout
    ``W_out h_t + b_out`` at each sequence's own last valid step (or at every step). The
    output non-linearity (softmax, identity) belongs to the loss. The 'gru' and 'lstm'
    cells replace ``f`` by PyTorch's gated cells (``u_t`` then holds every gate's input
    part, ``W_rec`` their stacked recurrent blocks); ``num_layers`` stacks layers, each
    reading the states of the one below (lecture deck: stacked RNNs).

    Dropout, when set, applies to the non-recurrent connections only, between layers and
    before the readout, never to the recurrence ``h_{t-1} -> h_t`` (thesis 2.2.5: masks
    on the recurrence disturb what the state carries from step to step). Masks are drawn
    from the network's own generator (:meth:`dropout_generator`), seeded from
    ``generator`` at initialization.

    The input projection is computed outside the fused PyTorch recurrence, which runs
    with its input weights frozen to the identity (:meth:`forward_states`): the gradient
    of ``u`` is exactly the pre-activation delta of every step, from which all temporal
    gradients follow in one backward pass (see :mod:`sklearn_rnn.optim`). :meth:`forward`
    computes the same function in one fused call per layer with ``W_in`` as the kernel's
    input weights, as fast as a plain :class:`torch.nn.LSTM` (the identity product costs
    ``(gates * hidden_size)^2`` per step, several times the recurrence for gated cells).

    Parameters
    ----------
    input_size : int
        Features per time step.
    hidden_size : int
        Recurrent units.
    output_size : int
        Outputs of the readout.
    cell : {'tanh', 'relu', 'gru', 'lstm', 'decay'}, default='tanh'
        The recurrence: Elman with ``f = tanh`` or ``relu``, PyTorch's GRU or LSTM;
        'decay' is the time-aware ``tanh`` recurrence
        :class:`~sklearn_rnn.nn.DecayRecurrence` (it needs ``gap_channel``), whose state
        decays with the gap between steps (its layers above the first are 'tanh').
        Temporal gradients (:func:`~sklearn_rnn.optim.temporal_gradients`) exist for
        every cell but 'decay'. Any cell added with
        :func:`~sklearn_rnn.nn.register_cell` is accepted by its name; the network
        asks that :class:`~sklearn_rnn.nn.Cell` object how to build, initialize and
        run each layer.
    num_layers : int, default=1
        Stacked recurrent layers.
    dropout : float, default=0.0
        Drop probability between layers and before the readout, in training mode.
    hidden_init : {'zero', 'learned'}, default='zero'
        The state before the first step: zero (the thesis), or a learned vector per
        layer and direction (``initial_hidden``, ``(num_layers, hidden_size)``, or
        ``(2 * num_layers, hidden_size)`` bidirectional with the backward direction's
        rows last; the LSTM also learns ``initial_cell``), starting at zero. Not
        available for 'decay'.
    spectral_radius : float or None, default=1.2
        Initialize as the thesis does (algorithm 3.1): ``W_rec`` Gaussian rescaled to
        this spectral radius, ``W_in`` and ``W_out`` from ``N(0, 0.1^2)``, biases zero.
        Gated cells rescale each gate's block of ``W_rec`` to this radius and start the
        LSTM's forget gate at bias 1 (see :meth:`~sklearn_rnn.nn.cells.FusedCell.reset_parameters`
        for why per block). None keeps PyTorch's default rules: ``W_rec`` uniform in
        ``±1/sqrt(hidden_size)`` (as :class:`torch.nn.GRU`), ``W_in`` and the biases in
        ``±1/sqrt(input_size)`` (as :class:`torch.nn.Linear`, the input projection).
    generator : torch.Generator, optional
        Source of randomness for the initialization (a CPU generator). The network is
        built and drawn on the CPU whatever PyTorch's default device (move it with
        ``.to(device)``), so a seed gives the same weights everywhere.
    gap_channel : int or None, default=None
        Input channel holding the (unit-free) time since the previous step, as
        :class:`~sklearn_rnn.sequences.InputEncoder` writes it. The 'tanh' and 'relu'
        cells read it as an ordinary input; the 'decay' cell also decays its state
        with it.
    n_masked : int, default=0
        Leading value channels that are followed by one mask channel each; the 'decay'
        cell decays them towards a baseline where the mask says "not observed".
    readout : {'last', 'pool'}, default='last'
        What the readout reads for one output per sequence: the state at each
        sequence's last valid step (the thesis), or 'pool', that state concatenated
        with the mean and the maximum of the last layer's states over the valid steps
        (``3 * hidden_size`` inputs), so that what the network saw early in a long
        sequence reaches the output without being carried to its end. Per-step outputs
        (``every_step=True``) need 'last', as do temporal gradients.
    conv_kernels : sequence of int, default=()
        Kernel widths of a convolutional input stage (:class:`~sklearn_rnn.nn.ConvStage`,
        ``conv_channels`` ReLU features per width) whose features the first layer reads
        instead of the raw inputs; empty: none. Not with a cell that reads the time
        between steps ('decay'); temporal gradients need none.
    conv_channels : int, default=32
        Features per kernel width of the convolutional stage.
    conv_pool : int, default=1
        Steps per max-pooling window of the convolutional stage's features: the
        recurrence runs over ``ceil(length / conv_pool)`` steps. Only with a stage.
    bidirectional : bool, default=False
        Run every layer a second time over each sequence read backwards (within its own
        length), with weights of its own (``reverse_layers``), as
        ``torch.nn.GRU(bidirectional=True)`` does: a step's state is the forward state
        and the backward state at that step side by side (``2 * hidden_size``), which
        the layer above reads. The readout of one output per sequence reads the forward
        state at the last valid step and the backward state at the first (the one that
        has read the whole sequence), and with 'pool' the mean and maximum of both
        (``6 * hidden_size`` inputs). Not with a cell that reads the time between steps
        ('decay'); temporal gradients need ``False``.

    Examples
    --------
    >>> import torch
    >>> from sklearn_rnn.nn import RecurrentNetwork
    >>> net = RecurrentNetwork(3, 8, 2, generator=torch.Generator().manual_seed(0))
    >>> x = torch.randn(4, 5, 3)              # 4 sequences, padded to 5 steps
    >>> lengths = torch.tensor([5, 3, 2, 1])  # valid steps of each
    >>> net(x, lengths).shape
    torch.Size([4, 2])

    Two LSTM layers with dropout between them and a learned initial state:

    >>> lstm = RecurrentNetwork(3, 8, 2, cell="lstm", num_layers=2, dropout=0.2,
    ...                         hidden_init="learned", generator=torch.Generator().manual_seed(0))
    >>> tuple(lstm.recurrent_weight.shape), tuple(lstm.initial_cell.shape)  # 4 gate blocks
    ((32, 8), (2, 8))
    >>> lstm.eval()(x, lengths).shape
    torch.Size([4, 2])

    Both directions of time, the readout reading ``2 * hidden_size`` states:

    >>> both = RecurrentNetwork(3, 8, 2, cell="gru", bidirectional=True,
    ...                         generator=torch.Generator().manual_seed(0))
    >>> both(x, lengths).shape, both.readout.in_features
    (torch.Size([4, 2]), 16)
    """

    #: Whether :meth:`forward` and :meth:`forward_states` run every layer's
    #: :meth:`~sklearn_rnn.nn.Cell.forward_vectorizable` and
    #: :meth:`~sklearn_rnn.nn.Cell.forward_states_vectorizable` (plain tensor operations,
    #: which :func:`torch.func.vmap` vectorizes over models) instead of its fused kernel
    #: and hand-written step-by-step recurrence. Off (the class default); the stacked
    #: grid-search trainer switches it on for its own copy of a network.
    vectorizable: bool = False

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        output_size: int,
        *,
        cell: str = "tanh",
        num_layers: int = 1,
        dropout: float = 0.0,
        hidden_init: str = "zero",
        spectral_radius: float | None = 1.2,
        generator: torch.Generator | None = None,
        gap_channel: int | None = None,
        n_masked: int = 0,
        readout: str = "last",
        conv_kernels: Sequence[int] = (),
        conv_channels: int = 32,
        conv_pool: int = 1,
        bidirectional: bool = False,
    ) -> None:
        super().__init__()
        if readout not in READOUTS:
            raise ValueError(f"readout must be one of {list(READOUTS)}; got {readout!r}.")
        spec = get_cell(cell)
        upper = _upper(spec)
        _check_sizes(input_size, hidden_size, output_size)
        _check_architecture(spec, upper, num_layers, dropout, hidden_init)
        if spectral_radius is not None:  # None: PyTorch's initialization
            _check_radius(spectral_radius, "spectral_radius")
        # numpy whole numbers (a grid over np.arange) as Python's, which torch's layers need
        input_size, hidden_size, output_size, num_layers = map(int, (input_size, hidden_size, output_size, num_layers))
        if not isinstance(bidirectional, (bool, np.bool_)):
            raise ValueError(f"bidirectional must be True or False; got {bidirectional!r}.")
        if spec.needs_gaps and gap_channel is None:
            raise ValueError(
                f"cell={cell!r} reads the time between steps, but no gap_channel was given: "
                "pass the index of the gap channel (estimators: set time_feature to the "
                "column of the time stamps), or use cell='tanh'."
            )
        _check_channels(spec, input_size, gap_channel, n_masked)
        gap_channel, n_masked = (None if gap_channel is None else int(gap_channel)), int(n_masked)
        if conv_kernels is None:
            conv_kernels = ()
        if not isinstance(conv_kernels, (str, bytes)):  # ConvStage refuses a str, naming it
            conv_kernels = _widths(conv_kernels, "conv_kernels")  # any sequence, as ConvStage takes it
        if conv_kernels and spec.needs_gaps:
            raise ValueError(
                f"cell={cell!r} reads the raw inputs and the time between steps, which a "
                "convolutional stage would replace by features of neighbouring steps; use "
                "conv_kernels=() with this cell."
            )
        if bidirectional and spec.needs_gaps:
            raise ValueError(
                f"cell={cell!r} reads the time since the previous step, which runs one way; "
                "bidirectional=True needs a cell that does not read it: use "
                "bidirectional=False with this cell."
            )
        if conv_pool != 1 and not conv_kernels:
            raise ValueError(
                f"conv_pool={conv_pool!r} pools the features of a convolutional stage, but "
                "conv_kernels is empty; give kernel widths, or use conv_pool=1."
            )
        self.cell = cell
        # The cell objects themselves: the network keeps working if the registry changes.
        self._cell: Cell = spec
        self._upper_cell: Cell = upper
        self.gap_channel = gap_channel
        self.spectral_radius = spectral_radius
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.dropout = float(dropout)
        self.hidden_init = hidden_init
        self.bidirectional = bool(bidirectional)
        directions = 2 if self.bidirectional else 1
        # The network's own layers are built uninitialized (meta device, then allocated):
        # reset_parameters draws every value from ``generator``. The cells' recurrences
        # are built on the CPU (_recurrence), keeping what their constructors set.
        self.conv: ConvStage | None = None
        if conv_kernels:
            self.conv = ConvStage(input_size, conv_kernels, conv_channels, pool=conv_pool, device="meta")
            input_size = self.conv.output_size
        self.input_projection = nn.Linear(input_size, spec.gates * hidden_size, device="meta")
        below = directions * hidden_size  # what a layer above the first reads
        with _global_generator_kept(spec, upper):  # one fork: each layer's constructor draws anew
            self.recurrence: nn.Module = _recurrence(spec, hidden_size, n_masked)
            self.upper_layers = nn.ModuleList(
                StackedLayer(self._upper_cell, below, hidden_size, device="meta") for _ in range(num_layers - 1)
            )
            # The backward direction's layers (empty for one direction): the first reads the
            # first layer's inputs, each above it the two directions of the layer below.
            self.reverse_layers = nn.ModuleList(
                StackedLayer(spec if index == 0 else self._upper_cell, input_size if index == 0 else below,
                             hidden_size, device="meta")
                for index in range(num_layers if self.bidirectional else 0)
            )
        self.initial_hidden: nn.Parameter | None = None
        self.initial_cell: nn.Parameter | None = None
        if hidden_init == "learned":  # one row per layer and direction, the forward ones first
            rows = directions * num_layers
            self.initial_hidden = nn.Parameter(torch.empty(rows, hidden_size, device="meta"))
            if spec.state_count > 1:  # the LSTM's cell state
                self.initial_cell = nn.Parameter(torch.empty(rows, hidden_size, device="meta"))
        self.readout_mode = readout
        self.readout = nn.Linear(READOUTS[readout] * below, output_size, device="meta")
        _allocate(self)  # keeps what make_recurrence froze (requires_grad)
        self._dropout_seed = 0
        self._dropout_generators: dict[str, torch.Generator] = {}
        self.reset_parameters(generator)

    @property
    def recurrent_weight(self) -> nn.Parameter:
        """The first layer's recurrent matrix ``W_rec``, (gates * hidden_size, hidden_size).

        For gated cells, the gate blocks stacked in PyTorch's order (``r, z, n`` for the
        GRU, ``i, f, g, o`` for the LSTM).
        """
        return self._cell.recurrent_weight(self.recurrence)

    def stack(self) -> list[tuple[Cell, nn.Linear, nn.Module]]:
        """``(cell, input_projection, recurrence)`` of every layer, bottom first: the
        forward direction's (:meth:`reverse_stack` gives the backward direction's of a
        bidirectional network).

        Returns
        -------
        list of tuple
            The layer's :class:`~sklearn_rnn.nn.Cell` (the first layer's is the one
            named by :attr:`cell`; the layers above run its ``upper`` cell), its input
            projection and its recurrence module.
        """
        return [
            (self._cell, self.input_projection, self.recurrence),
            *((self._upper_cell, layer.input_projection, layer.recurrence) for layer in self.upper_layers),
        ]

    def requires_grad_(self, requires_grad: bool = True) -> RecurrentNetwork:
        """Set whether autograd records operations on the parameters, as
        :meth:`torch.nn.Module.requires_grad_` does, keeping the fused modules' fixed
        input weights (:meth:`~sklearn_rnn.nn.Cell.frozen_parameters`) frozen: a
        freeze and unfreeze made them trainable, and the simplex method then found
        parameters that no temporal gradient covers.

        Parameters
        ----------
        requires_grad : bool, default=True

        Returns
        -------
        RecurrentNetwork
            This network.
        """
        super().requires_grad_(requires_grad)
        for cell, _, recurrence in self.stack() + self.reverse_stack():
            for parameter in cell.frozen_parameters(recurrence):
                parameter.requires_grad_(False)
        return self

    def reverse_stack(self) -> list[tuple[Cell, nn.Linear, nn.Module]]:
        """``(cell, input_projection, recurrence)`` of every layer's backward direction,
        bottom first; empty unless :attr:`bidirectional`.

        Returns
        -------
        list of tuple
            As :meth:`stack` gives them for the forward direction.
        """
        return [
            (self._cell if index == 0 else self._upper_cell, layer.input_projection, layer.recurrence)
            for index, layer in enumerate(self.reverse_layers)
        ]

    def dropout_generator(self, device: torch.device | str) -> torch.Generator:
        """The generator of the dropout masks on ``device``, seeded at initialization.

        Parameters
        ----------
        device : torch.device or str

        Returns
        -------
        torch.Generator
        """
        device = torch.device(device)
        if device.type == "cuda" and device.index is None:
            device = torch.device("cuda", torch.cuda.current_device())
        key = str(device)
        if key not in self._dropout_generators:
            generator = torch.Generator(device)
            # A state a model file held for a device absent where it was loaded (a GPU
            # model loaded on a CPU machine, then moved to a GPU): the stream goes on.
            held = getattr(self, "_unplaced_generator_states", {}).pop(key, None)
            if held is None:
                generator.manual_seed(self._dropout_seed)
            else:
                generator.set_state(held)
            self._dropout_generators[key] = generator
        return self._dropout_generators[key]

    def __setstate__(self, state: dict) -> None:
        super().__setstate__(state)
        if not hasattr(self, "reverse_layers"):  # pickled before the option: one direction
            self.bidirectional = False
            self.reverse_layers = nn.ModuleList()

    def __getstate__(self) -> dict:
        # A CUDA generator does not unpickle without CUDA: its state (a CPU tensor) is
        # kept as a model file keeps it, and the stream goes on where it is next needed.
        state = dict(self.__dict__)
        state["_dropout_generators"] = {
            key: gen for key, gen in self._dropout_generators.items() if key == "cpu"
        }
        state["_unplaced_generator_states"] = {
            **getattr(self, "_unplaced_generator_states", {}),
            **{key: gen.get_state() for key, gen in self._dropout_generators.items() if key != "cpu"},
        }
        return state

    def reset_parameters(self, generator: torch.Generator | None = None) -> None:
        """Draw the parameters anew from ``generator``: every parameter of the package's
        cells, the readout, the convolutional stage and the learned initial states
        (zeros). A user's cell writes what its ``reset_parameters`` writes; values its
        recurrence's constructor set and that method leaves (a ``LayerNorm``'s gain) keep
        what training made of them: build a new network for those.

        Parameters
        ----------
        generator : torch.Generator, optional
            Source of randomness (a CPU generator); the global one when None.
        """
        _check_generator(generator)
        with torch.no_grad():
            for index, (cell, projection, recurrence) in enumerate(self.stack()):
                cell.reset_parameters(
                    projection, recurrence, spectral_radius=self.spectral_radius, generator=generator
                )
                if index == 0:  # the readout's draws follow the first layer's
                    if self.spectral_radius is None:
                        bound = 1 / math.sqrt(self.readout.in_features)
                        uniform_(self.readout.weight, bound, generator)
                        uniform_(self.readout.bias, bound, generator)
                    else:
                        normal_(self.readout.weight, 0.1, generator)
                        self.readout.bias.zero_()
            for initial in (self.initial_hidden, self.initial_cell):
                if initial is not None:
                    initial.zero_()  # learned from h_0 = 0, the thesis' start
        if self.conv is not None:  # after the layers: without it the draws are as before
            self.conv.reset_parameters(generator)
        with torch.no_grad():  # the backward direction last, for the same reason
            for cell, projection, recurrence in self.reverse_stack():
                cell.reset_parameters(
                    projection, recurrence, spectral_radius=self.spectral_radius, generator=generator
                )
        # Dropout masks get their own stream, seeded from the initialization's.
        self._dropout_seed = int(torch.randint(0, 2**62, (1,), generator=generator, device="cpu"))
        self._dropout_generators = {}
        self._unplaced_generator_states: dict[str, torch.Tensor] = {}

    def forward_states(
        self, x: torch.Tensor, lengths: torch.Tensor | Sequence[int], *, every_step: bool = False
    ) -> NetworkStates:
        """Run the network and keep the tensors that temporal gradients need.

        Parameters
        ----------
        x : torch.Tensor of shape (batch, steps, input_size)
            Right-padded inputs; values at padded steps are ignored.
        lengths : torch.Tensor or sequence of int, of shape (batch,)
            Valid steps of each sequence, between 1 and ``steps``.
        every_step : bool, default=False
            Read out at every step instead of each sequence's last valid step.

        Returns
        -------
        NetworkStates
        """
        if self.bidirectional:
            raise ValueError(
                "forward_states keeps the states that temporal gradients read (the simplex "
                "method, sklearn_rnn.diagnostics.temporal_gradient_norms), and they follow one "
                "direction of time; this network is bidirectional. Build it with "
                "bidirectional=False for them."
            )
        self._refuse_per_step_readout(every_step)
        layers: list[LayerStates] = []
        steps = x.shape[1] if isinstance(x, torch.Tensor) and not x.is_nested and x.ndim == 3 else 0  # checked below
        x, lengths, gaps = self._inputs(x, lengths)
        _, projection, recurrence = self.stack()[0]
        x = tracked_input(x, [*projection.parameters(), *recurrence.parameters()])
        for index, (cell, projection, recurrence) in enumerate(self.stack()):
            z = x if index == 0 else self._dropout(layers[-1].hidden)  # (B, T, n_in)
            initial = self._initial(index, x.shape[0])
            method = "forward_states_vectorizable" if self.vectorizable else "forward_states"
            layer = getattr(cell, method)(projection, recurrence, z, initial, gaps, **_stop(cell, lengths))
            _checked_hidden(cell, method, layer, z, self.hidden_size)
            _check_initial_kept(cell, initial, layer)
            layers.append(layer)
        hidden = layers[-1].hidden  # (B, T, H)
        read, outputs = self._read(hidden, lengths, every_step)
        if every_step:
            outputs = outputs[:, :steps]  # (B, T, k): not an empty batch's padded step
        first = layers[0]
        return NetworkStates(first.inputs, first.projected, hidden, outputs, tuple(layers), read, lengths)

    def forward(
        self, x: torch.Tensor, lengths: torch.Tensor | Sequence[int], *, every_step: bool = False
    ) -> torch.Tensor:
        """The readout of each sequence, ``(batch, output_size)``: at its last valid step
        (with 'pool', of its pooled states; bidirectional, of both directions' ends).

        The same function as :meth:`forward_states` (which refuses a bidirectional
        network), in one fused call per layer and direction with ``W_in`` as the kernel's
        input weights (no identity product).

        Parameters
        ----------
        x : torch.Tensor of shape (batch, steps, input_size)
            Right-padded inputs.
        lengths : torch.Tensor or sequence of int, of shape (batch,)
            Valid steps of each sequence, between 1 and ``steps``.
        every_step : bool, default=False
            Return ``(batch, steps, output_size)``, the readout at every step.

        Returns
        -------
        torch.Tensor
        """
        self._refuse_per_step_readout(every_step)
        steps = x.shape[1] if isinstance(x, torch.Tensor) and not x.is_nested and x.ndim == 3 else 0  # checked below
        x, lengths, gaps = self._inputs(x, lengths)
        hidden = x
        reverse = self.reverse_stack()
        method = "forward_vectorizable" if self.vectorizable else "forward"
        for index, (cell, projection, recurrence) in enumerate(self.stack()):
            z = x if index == 0 else self._dropout(hidden)  # (B, T, n_in)
            initial = self._initial(index, x.shape[0])
            hidden = getattr(cell, method)(projection, recurrence, z, initial, gaps, **_stop(cell, lengths))
            _checked_hidden(cell, method, hidden, z, self.hidden_size)  # (B, T, H)
            if reverse:
                cell, projection, recurrence = reverse[index]
                initial = self._initial(self.num_layers + index, x.shape[0])
                backward = getattr(cell, method)(projection, recurrence, reverse_steps(z, lengths), initial, None,
                                                 **_stop(cell, lengths))
                _checked_hidden(cell, method, backward, z, self.hidden_size)
                hidden = torch.cat([hidden, reverse_steps(backward, lengths)], dim=2)  # (B, T, 2H)
        outputs = self._read(hidden, lengths, every_step)[1]
        return outputs[:, :steps] if every_step else outputs  # (B, T, k): not an empty batch's padded step

    def _refuse_per_step_readout(self, every_step: bool) -> None:
        """Refuse per-step outputs from a network built for one output per sequence: a
        'pool' readout reads ``3 * hidden_size`` values (a step's state is
        ``hidden_size``), and a convolutional stage's windows reach ahead of each step
        (and its pooling leaves fewer steps than the input's)."""
        if not every_step:
            return
        if self.readout_mode == "pool":
            raise ValueError(
                "every_step=True reads out each step's own state, but this network's readout "
                f"is 'pool', which reads {self.readout.in_features} values (a sequence's "
                "last state with the mean and maximum of its states); build it with "
                "readout='last' for per-step outputs."
            )
        if self.conv is not None:
            raise ValueError(
                "every_step=True gives an output at each step, but this network's "
                "convolutional stage reads steps ahead of each one (and its pooling leaves "
                "fewer steps); build it without conv_kernels for per-step outputs."
            )

    @property
    def input_size(self) -> int:
        """Features of an input step."""
        if self.conv is not None:
            return self.conv.convolutions[0].in_channels
        return self.input_projection.in_features

    def _inputs(
        self, x: torch.Tensor, lengths: torch.Tensor | Sequence[int]
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """What the first layer reads, the valid steps of each sequence there, and the
        gaps for a cell that reads them (after checking ``x`` and ``lengths``).

        The first layer reads the inputs with their padded steps zeroed, so that padding
        the caller filled with NaN reaches no output, or the convolutional stage's
        features (the stage zeroes padded steps itself, and no cell that reads gaps
        takes a stage)."""
        lengths = self._checked(x, lengths)
        if x.shape[1] == 0:  # an empty batch of no steps (FlatSequences.batch of no index): one padded step
            x = x.new_zeros(x.shape[0], 1, x.shape[2])
        if self.conv is not None:
            return self.conv(x, lengths), self.conv.output_lengths(lengths), None
        x = _zero_padding(x, lengths)
        if self._cell.needs_gaps and x.device.type == "cpu" and not functorch_transforms_active():
            _check_first_gaps(x[:, 0, self.gap_channel], self.gap_channel)
        return x, lengths, self._gaps(x)

    def _checked(self, x: torch.Tensor, lengths: torch.Tensor | Sequence[int]) -> torch.Tensor:
        """``lengths`` as a tensor, after checking ``x``'s shape and, where that costs no
        device synchronization (lengths on the CPU, outside the stacked trainer's
        vectorized pass), that every length lies in ``[1, steps]``. A fused kernel does
        not check shapes: an LSTM read past its inputs."""
        check_tensor(x)
        if x.ndim != 3 or x.shape[-1] != self.input_size:
            raise ValueError(
                f"x has shape {tuple(x.shape)}: expected (batch, steps, {self.input_size}), "
                f"right-padded sequences of the {self.input_size} input features the network "
                "was built for."
            )
        weights = next(self.parameters()).dtype
        if x.dtype != weights and not autocast_casts(x, weights):
            convert = f", or convert the network (network.to({x.dtype}))" if x.dtype.is_floating_point else ""
            raise ValueError(
                f"x is {x.dtype}, but the network's weights are {weights}: pass "
                f"x.to({weights}){convert}."
            )
        if lengths is None:  # torch.as_tensor said "Could not infer dtype of NoneType"
            batch, steps = x.shape[:2]
            raise ValueError(
                f"lengths must hold one integer length per sequence ({batch}), each between 1 "
                f"and the padded length {steps}; got None. For sequences that all fill the "
                f"{steps} steps, pass torch.full(({batch},), {steps})."
            )
        lengths = as_lengths(lengths)
        # Checked on the CPU only, where reading them costs no wait for a device; not
        # under a torch.func transform (vmap's per-sample lengths have no values to read).
        if self.vectorizable or lengths.device.type != "cpu" or functorch_transforms_active():
            return lengths
        return check_lengths(lengths, x.shape[0], x.shape[1])

    def _gaps(self, x: torch.Tensor) -> torch.Tensor | None:
        """The time since the previous step, ``(B, T)``, for a cell that reads it."""
        return x[..., self.gap_channel] if self._cell.needs_gaps else None

    def _initial(self, layer: int, batch: int) -> tuple[torch.Tensor, ...]:
        """The learned initial state of ``layer``, one row per sequence: ``(B, H)`` each."""
        if self.initial_hidden is None:
            return ()
        learned = [self.initial_hidden[layer]]
        if self.initial_cell is not None:
            learned.append(self.initial_cell[layer])
        # A copy per sequence, so that its gradient is per sequence (temporal gradients).
        return tuple(state.expand(batch, -1).contiguous() for state in learned)  # (B, H) each

    def _read(
        self, hidden: torch.Tensor, lengths: torch.Tensor, every_step: bool
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """What the readout reads (after dropout) and its outputs."""
        if every_step:
            read = self._dropout(hidden)  # (B, T, H)
        else:
            lengths = lengths.to(hidden.device)
            last = (lengths - 1).clamp(min=0)  # (B,)
            final = hidden[torch.arange(hidden.shape[0], device=hidden.device), last]  # (B, H)
            if self.bidirectional:  # the backward direction has read everything at step 0
                final = torch.cat([final[:, : self.hidden_size], hidden[:, 0, self.hidden_size :]], dim=1)
            if self.readout_mode == "pool":
                valid = torch.arange(hidden.shape[1], device=hidden.device) < lengths[:, None]  # (B, T)
                # The mean as one batched product with the weights 1/length on valid steps,
                # the maximum over the states with -inf added at padded steps: the same
                # values as a masked sum and a masked fill, in fewer and cheaper operations,
                # as long as the padded states are finite (0 * inf and inf - inf are NaN).
                # They are: the padded inputs are zeros, and a cell whose state could grow
                # to overflow there stops it at each sequence's end (Cell.bounded_state).
                weights = valid.to(hidden.dtype) / lengths[:, None].clamp(min=1)  # (B, T)
                mean = torch.bmm(weights[:, None, :], hidden).squeeze(1)  # (B, H)
                pad = torch.zeros_like(weights).masked_fill(~valid, -torch.inf)[..., None]  # (B, T, 1)
                peak = (hidden + pad).amax(1)  # (B, H)
                final = torch.cat([final, mean, peak], dim=1)  # (B, 3H)
            read = self._dropout(final)  # (B, [3]H)
        return read, self.readout(read)  # (B, [T,] out)

    def _dropout(self, tensor: torch.Tensor) -> torch.Tensor:
        if not self.training or self.dropout == 0:
            return tensor
        return dropout(tensor, self.dropout, self.dropout_generator(tensor.device))


def _upper(cell: Cell) -> Cell:
    """The cell of the layers above the first: the one :attr:`Cell.upper` names, or
    ``cell`` itself."""
    if cell.upper is None:
        return cell
    try:
        return get_cell(cell.upper)
    except ValueError:  # which blamed the name the user passed, not the attribute
        raise ValueError(
            f"cell {cell.name!r} has upper={cell.upper!r}, which is not registered: register "
            f"that cell first, or set upper to one of {sorted(CELLS)}, or to None for layers "
            f"of {cell.name!r} itself."
        ) from None


def _stop(cell: Cell, lengths: torch.Tensor) -> dict[str, torch.Tensor]:
    """The keywords that ask a layer of ``cell`` to stop each sequence's state at its
    end: ``lengths`` for a cell whose state is not bounded (:attr:`Cell.bounded_state`),
    none for the others, whose states stay bounded over the padding."""
    return {} if cell.bounded_state else {"lengths": lengths}


def tracked_input(x: torch.Tensor, bottom: Sequence[torch.Tensor]) -> torch.Tensor:
    """``x``, made a leaf that requires grad when autograd is on and neither ``x`` nor
    any of the ``bottom`` layer's parameters does.

    Temporal gradients ask autograd for the gradient of every layer's projected inputs;
    a frozen bottom layer (fine-tuning the upper layers or the readout) would otherwise
    compute them without a graph. Autograd computes the gradient of ``x`` itself only
    when asked for it.
    """
    if not torch.is_grad_enabled() or x.requires_grad or any(t.requires_grad for t in bottom):
        return x
    if functorch_transforms_active():  # no requires_grad_() there (the stacked trainer's vmap)
        return x
    return x.detach().requires_grad_()


def check_tensor(x: object, *, batch_first: bool = True) -> None:
    """Refuse inputs that are not a tensor, with the way to one: a PackedSequence or an
    array has no padded steps to read (PyTorch failed on a missing attribute).

    Parameters
    ----------
    x : object
        The inputs given.
    batch_first : bool, default=True
        The layout expected, ``(batch, steps, features)`` or ``(steps, batch, features)``.

    Raises
    ------
    TypeError
        When ``x`` is not a :class:`torch.Tensor`, or is a nested one.

    Examples
    --------
    >>> import torch
    >>> from torch.nn.utils.rnn import pack_sequence
    >>> from sklearn_rnn.nn._network import check_tensor
    >>> check_tensor(torch.zeros(2, 3, 1))
    >>> check_tensor(pack_sequence([torch.zeros(3, 1), torch.zeros(2, 1)]))
    Traceback (most recent call last):
    ...
    TypeError: x must be a torch.Tensor of right-padded sequences, (batch, steps, features); got a PackedSequence: pass a right-padded tensor and lengths instead, which torch.nn.utils.rnn.pad_packed_sequence(x, batch_first=True) gives.
    """
    if isinstance(x, torch.Tensor) and not x.is_nested:
        return
    layout = "(batch, steps, features)" if batch_first else "(steps, batch, features)"
    if isinstance(x, torch.Tensor):  # a nested tensor: PyTorch failed with "Internal error"
        padded = "torch.nested.to_padded_tensor(x, 0.0)" + ("" if batch_first else ".transpose(0, 1)")
        got = (
            f"a nested tensor: pass a right-padded tensor and lengths instead, {padded} "
            "and [len(sequence) for sequence in x.unbind()]."
        )
    elif isinstance(x, nn.utils.rnn.PackedSequence):
        got = (
            "a PackedSequence: pass a right-padded tensor and lengths instead, which "
            f"torch.nn.utils.rnn.pad_packed_sequence(x, batch_first={batch_first}) gives."
        )
    else:
        got = f"{type(x).__name__}: convert it with torch.as_tensor(x)."
    raise TypeError(f"x must be a torch.Tensor of right-padded sequences, {layout}; got {got}")


def reverse_steps(x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """Each sequence's valid steps in reverse order, its padded steps where they were.

    Parameters
    ----------
    x : torch.Tensor of shape (batch, steps, n)
        Right-padded sequences.
    lengths : torch.Tensor of shape (batch,)
        Valid steps of each.

    Returns
    -------
    torch.Tensor of shape (batch, steps, n)
        Step ``t < length`` holds step ``length - 1 - t`` of ``x``; applied twice, ``x``.

    Examples
    --------
    >>> import torch
    >>> from sklearn_rnn.nn._network import reverse_steps
    >>> x = torch.arange(8.0).reshape(2, 4, 1)
    >>> reverse_steps(x, torch.tensor([4, 2]))[..., 0]
    tensor([[3., 2., 1., 0.],
            [5., 4., 6., 7.]])
    """
    steps = torch.arange(x.shape[1], device=x.device)[None, :]  # (1, T)
    length = lengths.to(x.device)[:, None]  # (B, 1)
    index = torch.where(steps < length, length - 1 - steps, steps)  # (B, T)
    return x.gather(1, index[..., None].expand(-1, -1, x.shape[2]))


class StackedLayer(nn.Module):
    """Input projection and recurrence of one layer above the first, or of a backward
    direction's layer (the first included).

    Parameters
    ----------
    cell : Cell
        The layer's cell.
    input_size : int
        Inputs of the projection (the states of the layer below, both directions', or
        for a backward direction's first layer the network's inputs).
    hidden_size : int
        Recurrent units.
    device : torch.device or str, optional
        Where to create the (uninitialized) input projection; the recurrence is built
        by :func:`_recurrence`.

    Examples
    --------
    >>> from sklearn_rnn.nn import get_cell
    >>> from sklearn_rnn.nn._network import StackedLayer
    >>> StackedLayer(get_cell("gru"), 8, 8, device="meta").input_projection.out_features
    24
    """

    def __init__(
        self, cell: Cell, input_size: int, hidden_size: int, *, device: torch.device | str | None = None
    ) -> None:
        super().__init__()
        self.input_projection = nn.Linear(input_size, cell.gates * hidden_size, device=device)
        self.recurrence = _recurrence(cell, hidden_size)


def _recurrence(cell: Cell, hidden_size: int, n_masked: int = 0) -> nn.Module:
    """``cell.make_recurrence``, with the global generator left as it was.

    A cell whose :meth:`Cell.reset_parameters` writes every value
    (:attr:`Cell.writes_every_value`: the built-in ones) gets its module on the meta
    device, as the network's own layers, which the network allocates: its constructor
    draws nothing. Another is built on the CPU, whatever PyTorch's default device: what
    its constructor sets (a submodule's initialization, a constant buffer) stands
    wherever ``reset_parameters`` does not write, and a constructor that draws (as
    :class:`torch.nn.RNN`'s does) draws from the global generator, which is then
    restored (rewinding what other threads drew meanwhile: a process-wide generator
    cannot be forked per thread). Within one network the generator is restored once,
    after its last layer: each layer's constructor draws values of its own.
    """
    if cell.writes_every_value:
        return cell.make_recurrence(hidden_size, n_masked=n_masked, device="meta")
    with _global_generator_kept(cell), torch.device("cpu"):
        return cell.make_recurrence(hidden_size, n_masked=n_masked, device="cpu")


#: Whether this context is inside :func:`_global_generator_kept` (a network's layers).
_KEEPING_GENERATOR: contextvars.ContextVar[bool] = contextvars.ContextVar("_keeping_generator", default=False)


@contextlib.contextmanager
def _global_generator_kept(*cells: Cell) -> Iterator[None]:
    """Restore the global CPU generator on exit, where a module of one of ``cells`` is
    built by its constructor (not :attr:`Cell.writes_every_value`): those of the others
    draw nothing, and a restore would rewind what other threads drew meanwhile. Inside
    another such block, the outer one restores it (so that the layers built within it
    draw in turn, not alike)."""
    if _KEEPING_GENERATOR.get() or all(cell.writes_every_value for cell in cells):
        yield
        return
    token = _KEEPING_GENERATOR.set(True)
    try:
        with torch.random.fork_rng(devices=[]):
            yield
    finally:
        _KEEPING_GENERATOR.reset(token)


def _allocate(module: nn.Module) -> None:
    """Allocate on the CPU, uninitialized, the tensors of ``module`` and its submodules
    that were built on the meta device, keeping the others (and their values)."""
    for sub in module.modules():
        if any(tensor.is_meta for tensor in (*sub.parameters(recurse=False), *sub.buffers(recurse=False))):
            sub.to_empty(device="cpu", recurse=False)


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
    >>> from sklearn_rnn.nn._network import dropout
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


def _check_sizes(input_size: int, hidden_size: int, output_size: int) -> None:
    for name, value in (("input_size", input_size), ("hidden_size", hidden_size),
                        ("output_size", output_size)):
        if not (_is_int(value) and value >= 1):
            raise ValueError(f"{name} must be a positive int; got {value!r}.")


def _check_channels(cell: Cell, input_size: int, gap_channel: int | None, n_masked: int) -> None:
    """Refuse a layout of value, mask and gap channels that the inputs cannot hold: the
    first ``n_masked`` channels are values, the next ``n_masked`` their masks."""
    if not (_is_int(n_masked) and 0 <= 2 * n_masked <= input_size):
        raise ValueError(
            f"n_masked={n_masked!r}: expected an int in [0, {input_size // 2}], values "
            f"followed by one mask channel each within the {input_size} input channels."
        )
    if gap_channel is not None and not (_is_int(gap_channel) and 2 * n_masked <= gap_channel < input_size):
        raise ValueError(
            f"gap_channel={gap_channel!r}: expected the index of an input channel after the "
            f"{n_masked} value and {n_masked} mask channels, in [{2 * n_masked}, "
            f"{input_size - 1}] (cell={cell.name!r})."
        )


def _check_generator(generator: object) -> None:
    """Refuse a ``generator`` the initialization cannot draw from: it draws on the CPU
    (an int seed reached ``torch.randn`` as "invalid combination of arguments")."""
    if generator is None or (isinstance(generator, torch.Generator) and generator.device.type == "cpu"):
        return
    how = "such as torch.Generator().manual_seed(0) for reproducible weights, or None for the global one"
    if isinstance(generator, torch.Generator):
        raise ValueError(f"generator must be a CPU torch.Generator (weights are drawn on the CPU), {how}; "
                         f"got one on {generator.device}.")
    raise TypeError(f"generator must be a CPU torch.Generator, {how}; got {generator!r} of type "
                    f"{type(generator).__name__}.")


def _check_architecture(cell: Cell, upper: Cell, num_layers: int, dropout: float, hidden_init: str) -> None:
    """Refuse a depth, dropout or initial state the network cannot have; ``upper`` is
    the cell of the layers above the first (``cell`` itself, or its :attr:`Cell.upper`)."""
    if not _is_int(num_layers) or num_layers < 1:
        raise ValueError(f"num_layers must be a positive int; got {num_layers!r}.")
    if not (isinstance(dropout, Real) and 0 <= dropout < 1):
        raise ValueError(
            f"dropout must be a probability in [0, 1); got {dropout!r}. Use 0 for no dropout."
        )
    if hidden_init not in HIDDEN_INITS:
        raise ValueError(f"hidden_init must be one of {list(HIDDEN_INITS)}; got {hidden_init!r}.")
    if hidden_init == "learned" and not cell.learned_initial:
        raise ValueError(
            f"hidden_init='learned' is not available for cell={cell.name!r}, whose state starts "
            "at zero; use hidden_init='zero', or another cell."
        )
    if hidden_init == "learned" and num_layers > 1:  # the layers above run the upper cell
        if not upper.learned_initial:
            raise ValueError(
                f"hidden_init='learned' is not available for cell={cell.name!r} with "
                f"num_layers={num_layers}: its layers above the first run its upper cell "
                f"{upper.name!r}, whose state starts at zero; use hidden_init='zero', or "
                "num_layers=1."
            )
        if upper.state_count != cell.state_count:
            raise ValueError(
                f"hidden_init='learned' learns as many initial state tensors for every layer "
                f"as cell={cell.name!r} keeps ({cell.state_count}), but its upper cell "
                f"{upper.name!r}, which the layers above the first run, keeps "
                f"{upper.state_count}; use hidden_init='zero', or num_layers=1."
            )


def _check_first_gaps(first: torch.Tensor, channel: int) -> None:
    """Refuse a first step's gap that is not finite: the recurrence never reads it, but
    the input projection does (NaN outputs, where ``pandas.Series.diff()`` or
    ``np.diff(prepend=np.nan)`` leave NaN)."""
    bad = ~torch.isfinite(first)
    if bool(bad.any()):
        sequence = int(bad.nonzero()[0, 0])
        raise ValueError(
            f"gap_channel {channel} holds {first[sequence].item()!r} at the first step of sequence "
            f"{sequence}: a first step has no step before it, and its gap must be a number. Give "
            "it a gap of 0 (pandas' diff() leaves NaN there: .diff().fillna(0))."
        )
