"""What a cell is: the :class:`Cell` protocol, the fused-kernel cells' shared layer code, the registry.

Every layer splits its cell in two: an input projection ``u_t = W_in z_t + b`` of all
gate pre-activations at once (``G * H`` values: ``G = 1`` for the Elman cells, 3 for the
GRU, 4 for the LSTM), and a recurrence over ``u``. For the cells of PyTorch's fused
kernels (:class:`FusedCell`) the recurrence is a :class:`torch.nn.RNN`,
:class:`torch.nn.GRU` or :class:`torch.nn.LSTM` whose input weights are frozen to the
identity. Run that way (:meth:`FusedCell.forward_states`), the gradient of ``u`` is the
delta of every gate pre-activation at every step, from which the temporal gradients of
all parameters follow in one backward pass (:func:`sklearn_rnn.optim.temporal_gradients`).
On a CPU, :meth:`FusedCell.forward_states` runs the same recurrence step by step instead
(:func:`stepwise_recurrence`), whose hand-written backward pass writes the deltas
directly, without the identity products.

When no temporal gradients are needed, :meth:`FusedCell.forward` runs the same cell in
one fused call on the raw inputs, with ``W_in`` and ``b`` as the kernel's input weights:
the identity product costs ``(G * H)^2`` per step and sequence, which for gated cells is
several times the recurrence itself on a CPU. Both give the same function; the first is
what the simplex optimizer trains with, the second what the other optimizers and
prediction use.
"""

from __future__ import annotations

import functools
import math
import warnings
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Set
from typing import Any, NamedTuple

import numpy as np
import torch
from torch import nn

from .._lengths import check_lengths
from ..init import spectral_radius_
from ._stepwise import (
    Record,
    RecurrentWeights,
    forward_ad_active,
    functorch_transforms_active,
    has_tangent,
    once_differentiable_error,
    padded_steps,
)

__all__ = [
    "CELLS",
    "Cell",
    "FusedCell",
    "LayerStates",
    "cell_names",
    "cell_of_module",
    "get_cell",
    "register_cell",
    "stepwise_recurrence",
    "unregister_cell",
]

#: The registry: every cell the package can build, by name (:func:`register_cell`).
CELLS: dict[str, Cell] = {}

# cuDNN copies weights that are not views of one buffer (those of FusedCell.forward are
# not) and says so on every call; the copy is small beside the recurrence.
_NOT_FLAT = "RNN module weights are not part of single contiguous chunk of memory"


class LayerStates(NamedTuple):
    """What one layer computed in a cell's ``forward_states``, for temporal gradients.

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


class Cell(ABC):
    """One recurrent cell: everything the network, the optimizers and the estimators ask about it.

    A cell is a stateless description (one instance per cell, kept in :data:`CELLS`):
    it builds a layer's recurrence module, initializes it, runs it, and says what it
    supports. The network (:class:`~sklearn_rnn.nn.RecurrentNetwork`), the temporal
    gradients, the plain-PyTorch adapter and the estimators read these attributes and
    call these methods; none of them branches on a cell's name. A copy of a cell (and
    so of a network) is the cell itself; a pickle names it, and loads the cell
    registered under that name.

    Subclass it for a recurrence written in tensor operations (as the time-aware
    'decay' cell is), or :class:`FusedCell` for one of PyTorch's fused kernels, then
    :func:`register_cell` an instance.

    Attributes
    ----------
    name : str
        The value of ``cell=`` that selects it.
    gates : int
        Gate blocks: the input projection has ``gates * hidden_size`` outputs.
    state_count : int
        State tensors per layer: 1 (``h``), 2 for the LSTM (``h`` and ``c``).
    upper : str or None
        The cell of the layers above the first (by name); None for this one.
    needs_gaps : bool
        Whether it reads the time since the previous step (a ``gap_channel``).
    learned_initial : bool
        Whether ``hidden_init='learned'`` applies.
    temporal_gradients : bool
        Whether :func:`~sklearn_rnn.optim.temporal_gradients` (and so the simplex
        optimizer) supports it: the cell then implements :meth:`stepwise`.
    stackable : bool
        Whether :func:`torch.func.vmap` vectorizes its forward pass over models (the
        stacked grid-search trainer): :meth:`forward_vectorizable` is written in plain
        tensor operations.
    default_spectral_radius : float or None
        What ``spectral_radius='auto'`` of the estimators means for it: the thesis'
        1.2, or None for PyTorch's uniform initialization.
    default_alpha : float
        What ``alpha='auto'`` of the estimators means for it.
    torch_mode : str or None
        The ``mode`` of the :class:`torch.nn.RNNBase` module that runs this cell
        (``'RNN_TANH'``, ``'GRU'``, ...), for :class:`~sklearn_rnn.optim.RecurrentAdapter`.
    has_recurrent_bias : bool
        Whether its recurrence keeps a bias ``b_hh`` of its own (the GRU's candidate
        block ``b_hn`` sits inside the reset gate, so it cannot merge into ``b``).
    trains_stepwise : bool
        Whether training on a CPU runs the step-by-step recurrence with its hand-written
        backward pass (:func:`stepwise_recurrence`) instead of the fused kernel, where
        that is the faster of the two (see :meth:`FusedCell.forward`). That backward
        pass is differentiable once: for second derivatives through a layer (a gradient
        penalty, a Hessian), set it to False on the registered cell,
        ``get_cell('gru').trains_stepwise = False``. Under a :mod:`torch.func` transform
        or a forward-mode AD level (:mod:`torch.autograd.forward_ad`) a fused cell's
        layer on a CPU runs its plain tensor operations
        (:meth:`FusedCell.forward_vectorizable`) by itself, which every transform
        differentiates (oneDNN's float32 LSTM kernel has no forward-mode derivative).
    bounded_state : bool
        Whether its state stays bounded however many steps it runs (a tanh or a gate
        bounds it). Run past a short sequence's end to its batch's padded length, a state
        that can grow ('relu', whose recurrent matrix the thesis starts at spectral radius
        1.2) overflows, and zero weights times ``inf`` make the batch's gradients NaN.
        The network passes such a cell (False) the batch's ``lengths=``, a keyword of its
        :meth:`forward`, :meth:`forward_states` and their vectorizable forms, which must
        then stop each sequence's state at its end: zeros at its padded steps. The
        defaults of the other three pass it on, so a :class:`Cell` written with the four
        abstract methods takes it in :meth:`forward_states`.
    writes_every_value : bool
        Whether :meth:`reset_parameters` writes every value of the module
        :meth:`make_recurrence` builds. The network then builds that module on the meta
        device, drawing nothing; otherwise on the CPU, keeping its constructor's values,
        with the global generator restored after the constructor's draws (a restore
        that rewinds what other threads drew meanwhile). True for the built-in cells.

    Examples
    --------
    >>> from sklearn_rnn.nn import get_cell
    >>> gru = get_cell("gru")
    >>> gru.gates, gru.temporal_gradients, gru.default_spectral_radius
    (3, True, None)
    >>> get_cell("decay").needs_gaps, get_cell("decay").upper
    (True, 'tanh')
    """

    name: str = ""
    gates: int = 1
    state_count: int = 1
    upper: str | None = None
    needs_gaps: bool = False
    learned_initial: bool = True
    temporal_gradients: bool = False
    stackable: bool = False
    default_spectral_radius: float | None = 1.2
    default_alpha: float = 0.0
    torch_mode: str | None = None
    has_recurrent_bias: bool = False
    trains_stepwise: bool = False
    bounded_state: bool = True
    writes_every_value: bool = False

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"

    def runs_bfloat16_on_cpu(self) -> bool:
        """Whether the cell trains under bfloat16 autocast on this CPU: True for a cell
        of tensor operations (autocast casts them); a fused kernel answers for itself.

        Returns
        -------
        bool
        """
        return True

    def __reduce__(self) -> tuple[Any, tuple[str, dict[str, Any]]]:
        # Pickled by name, as a class is: a network unpickles with the registered cell,
        # which must be the cell it ran (not another registered under that name since).
        return _registered_as, (self.name, _recorded_identity(self))

    def __copy__(self) -> Cell:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> Cell:
        # A stateless description, shared by every network of the cell: a copy of a
        # network (an estimator's predict makes one) runs the cell its original runs,
        # whatever the registry holds now.
        return self

    @abstractmethod
    def make_recurrence(
        self, hidden_size: int, *, n_masked: int = 0, device: torch.device | str | None = None
    ) -> nn.Module:
        """The module of one layer's recurrence over ``gates * hidden_size`` projected inputs.

        Parameters
        ----------
        hidden_size : int
            Recurrent units.
        n_masked : int, default=0
            Leading value channels of the network's inputs that have a mask channel.
        device : torch.device or str, optional
            Where to create the parameters. The network builds the module on the CPU
            (and restores the global generator after it), then calls
            :meth:`reset_parameters`: what the constructor sets (a submodule's own
            initialization, a constant buffer) stands wherever that does not write.

        Returns
        -------
        torch.nn.Module
        """

    def frozen_parameters(self, recurrence: nn.Module) -> list[nn.Parameter]:
        """The parameters of a recurrence module made by :meth:`make_recurrence` that
        stay fixed (PyTorch's fused modules carry input weights, set to the identity,
        that the network's own input projection replaces); none by default.

        Parameters
        ----------
        recurrence : torch.nn.Module

        Returns
        -------
        list of torch.nn.Parameter
        """
        return []

    @abstractmethod
    def reset_parameters(
        self,
        projection: nn.Linear,
        recurrence: nn.Module,
        *,
        spectral_radius: float | None,
        generator: torch.Generator | None,
    ) -> None:
        """Initialize one layer: its input projection and its recurrence.

        The network calls it once it has built the layer, and again for every new
        draw (:meth:`~sklearn_rnn.nn.RecurrentNetwork.reset_parameters`). The
        projection arrives uninitialized: write all of it. Write the recurrence's
        values that a new draw should reset, the random ones from ``generator`` (draws
        in the module's constructor come from the global generator, whatever the
        seed); values its constructor set and this leaves alone are kept.

        Parameters
        ----------
        projection : torch.nn.Linear
            ``W_in``, ``b``.
        recurrence : torch.nn.Module
            From :meth:`make_recurrence`.
        spectral_radius : float or None
            The thesis' initialization at this radius, or None for PyTorch's.
        generator : torch.Generator or None
            A CPU generator; the global one when None.
        """

    @abstractmethod
    def recurrent_weight(self, recurrence: nn.Module) -> nn.Parameter:
        """``W_rec`` of ``recurrence``: ``(gates * hidden_size, hidden_size)``.

        Parameters
        ----------
        recurrence : torch.nn.Module

        Returns
        -------
        torch.nn.Parameter
        """

    def recurrent_bias(self, recurrence: nn.Module) -> torch.Tensor | None:
        """``b_hh`` of ``recurrence`` where the cell keeps one (:attr:`has_recurrent_bias`).

        Parameters
        ----------
        recurrence : torch.nn.Module

        Returns
        -------
        torch.Tensor or None
        """
        return None

    @abstractmethod
    def forward_states(
        self,
        projection: nn.Linear,
        recurrence: nn.Module,
        z: torch.Tensor,
        initial: tuple[torch.Tensor, ...],
        gaps: torch.Tensor | None,
        *,
        lengths: torch.Tensor | None = None,
    ) -> LayerStates:
        """Run one layer and keep what temporal gradients read.

        Parameters
        ----------
        projection : torch.nn.Linear
            ``W_in``, ``b``.
        recurrence : torch.nn.Module
            From :meth:`make_recurrence`.
        z : torch.Tensor of shape (batch, steps, n_inputs)
            The layer's inputs.
        initial : tuple of torch.Tensor of shape (batch, hidden_size)
            ``(h_0,)`` or ``(h_0, c_0)``; ``()`` for zero.
        gaps : torch.Tensor of shape (batch, steps) or None
            Time since the previous step, for a cell that :attr:`needs_gaps`.
        lengths : torch.Tensor of shape (batch,), optional
            Valid steps of each sequence. The network passes them only to a cell
            without a :attr:`bounded_state`, which must then stop each sequence's
            state at its end: zeros at its padded steps (as the 'relu' cell does). A
            cell whose state is bounded may leave the keyword out.

        Returns
        -------
        LayerStates
        """

    def forward(
        self,
        projection: nn.Linear,
        recurrence: nn.Module,
        z: torch.Tensor,
        initial: tuple[torch.Tensor, ...],
        gaps: torch.Tensor | None,
        *,
        lengths: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Run one layer for its states only: ``(batch, steps, hidden_size)``.

        The same function as :meth:`forward_states`; a cell may compute it faster.

        Parameters
        ----------
        projection, recurrence, z, initial, gaps, lengths
            As for :meth:`forward_states`.

        Returns
        -------
        torch.Tensor of shape (batch, steps, hidden_size)
        """
        states = self.forward_states(projection, recurrence, z, initial, gaps, **_given(lengths))
        _check_initial_kept(self, initial, states)
        return _checked_hidden(self, "forward_states", states, z)

    def forward_vectorizable(
        self,
        projection: nn.Linear,
        recurrence: nn.Module,
        z: torch.Tensor,
        initial: tuple[torch.Tensor, ...],
        gaps: torch.Tensor | None,
        *,
        lengths: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """The same layer as :meth:`forward`, in plain tensor operations that :func:`torch.func.vmap` vectorizes.

        What a network runs when its :attr:`~sklearn_rnn.nn.RecurrentNetwork.vectorizable`
        switch is on (the stacked grid-search trainer, :attr:`stackable` cells only):
        no fused kernel and no hand-written autograd function, which have no
        vectorization rule. A cell whose :meth:`forward` is already written that way
        (the 'decay' cell) keeps this default, :meth:`forward` itself.

        Parameters
        ----------
        projection, recurrence, z, initial, gaps, lengths
            As for :meth:`forward_states`.

        Returns
        -------
        torch.Tensor of shape (batch, steps, hidden_size)
        """
        return self.forward(projection, recurrence, z, initial, gaps, **_given(lengths))

    def forward_states_vectorizable(
        self,
        projection: nn.Linear,
        recurrence: nn.Module,
        z: torch.Tensor,
        initial: tuple[torch.Tensor, ...],
        gaps: torch.Tensor | None,
        *,
        lengths: torch.Tensor | None = None,
    ) -> LayerStates:
        """:meth:`forward_states` in plain tensor operations (see :meth:`forward_vectorizable`).

        What a network's :meth:`~sklearn_rnn.nn.RecurrentNetwork.forward_states` runs
        when its :attr:`~sklearn_rnn.nn.RecurrentNetwork.vectorizable` switch is on
        (the stacked trainer's simplex method). The default is :meth:`forward_states`
        itself, for a cell written in plain tensor operations.

        Parameters
        ----------
        projection, recurrence, z, initial, gaps, lengths
            As for :meth:`forward_states`.

        Returns
        -------
        LayerStates
        """
        return self.forward_states(projection, recurrence, z, initial, gaps, **_given(lengths))

    # ------------------------------------------------------------ temporal gradients
    def stepwise(
        self,
        u: torch.Tensor,
        weight: torch.Tensor,
        bias: torch.Tensor | None,
        h0: torch.Tensor | None,
        c0: torch.Tensor | None,
        record: Record,
    ) -> torch.Tensor:
        """The recurrence over ``u`` with a hand-written backward pass (see :func:`stepwise_recurrence`).

        The backward pass must give the gradient of ``u`` as the delta of every gate
        pre-activation, and the forward pass must leave in ``record`` the states
        ``h_t`` (time-major) and ``h_0``, from which the recurrent weights get their
        gradient.

        Parameters
        ----------
        u : torch.Tensor of shape (batch, steps, gates * hidden)
            The projected inputs.
        weight : torch.Tensor of shape (gates * hidden, hidden)
            ``W_hh``, detached.
        bias : torch.Tensor of shape (gates * hidden,) or None
            ``b_hh``, detached, for a cell that :attr:`has_recurrent_bias`.
        h0, c0 : torch.Tensor of shape (batch, hidden) or None
            Initial states; None for zero.
        record : Record
            What the forward pass leaves for the recurrent weights' gradient.

        Returns
        -------
        torch.Tensor of shape (batch, steps, hidden)
        """
        raise ValueError(
            f"cell={self.name!r} has no step-by-step recurrence: temporal gradients need one of "
            f"{cell_names(temporal_gradients=True)}."
        )

    def gate_recurrent_delta(self, delta: torch.Tensor, resets: torch.Tensor | None) -> torch.Tensor:
        """The delta of ``W_hh h_{t-1} + b_hh`` from ``delta = dL/du``: ``delta`` itself.

        A cell whose recurrent part enters a pre-activation through a gate (the
        GRU's candidate) scales it there.

        Parameters
        ----------
        delta : torch.Tensor of shape (steps, batch, gates * hidden)
            ``dL/du``, time-major.
        resets : torch.Tensor of shape (steps, batch, hidden) or None
            The gate the recurrent part passes through, as the forward pass computed it.

        Returns
        -------
        torch.Tensor of shape (steps, batch, gates * hidden)
        """
        return delta

    def recurrent_deltas(
        self,
        delta: torch.Tensor,
        states: LayerStates,
        previous: torch.Tensor,
        weight_hh: torch.Tensor,
        bias_hh: torch.Tensor | None,
    ) -> torch.Tensor | None:
        """For temporal gradients: the delta of the recurrent part, where it differs from ``delta``.

        Parameters
        ----------
        delta : torch.Tensor of shape (steps, batch, gates * hidden)
            ``dL/du``, time-major, in the parameters' dtype.
        states : LayerStates
            What the layer's forward pass kept.
        previous : torch.Tensor of shape (steps, batch, hidden)
            ``h_{t-1}`` of every step.
        weight_hh : torch.Tensor of shape (gates * hidden, hidden)
        bias_hh : torch.Tensor of shape (gates * hidden,) or None

        Returns
        -------
        torch.Tensor of shape (steps, batch, gates * hidden) or None
            None when the recurrent part's delta is ``delta`` (the Elman cells, the
            LSTM): ``[W_rec | b_rec | W_in | b]`` then form one block.
        """
        return None

    def project_module_inputs(
        self,
        z: torch.Tensor,
        weight_ih: torch.Tensor,
        bias_ih: torch.Tensor | None,
        weight_hh: torch.Tensor,
        bias_hh: torch.Tensor | None,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """``u`` and ``b_hh`` for :func:`stepwise_recurrence` from a PyTorch module's parameters.

        PyTorch's modules add ``b_ih`` and ``b_hh`` to every pre-activation, so both
        go into ``u`` (a cell with :attr:`has_recurrent_bias` keeps ``b_hh`` apart).

        Parameters
        ----------
        z : torch.Tensor of shape (batch, steps, n_inputs)
        weight_ih : torch.Tensor of shape (gates * hidden, n_inputs)
        bias_ih : torch.Tensor or None
        weight_hh : torch.Tensor of shape (gates * hidden, hidden)
        bias_hh : torch.Tensor or None

        Returns
        -------
        projected : torch.Tensor of shape (batch, steps, gates * hidden)
        bias_hh : torch.Tensor or None
            What :func:`stepwise_recurrence` takes as ``bias_hh``.
        """
        bias = None if bias_ih is None else bias_ih + bias_hh
        return nn.functional.linear(z, weight_ih, bias), None  # (B, T, G * H)


@functools.cache
def _fused_runs_bfloat16_on_cpu(module: type[nn.RNNBase]) -> bool:
    """See :meth:`FusedCell.runs_bfloat16_on_cpu`."""
    # Built on the meta device and filled: no draw from the global generator, and no
    # restore of it that would rewind what other threads drew meanwhile.
    recurrence = module(1, 1, batch_first=True, device="meta").to_empty(device="cpu")
    with torch.no_grad():
        for parameter in recurrence.parameters():
            parameter.fill_(0.5)
    try:
        # With gradients whatever the caller's mode: the answer is cached for the process
        # (under torch.no_grad the backward failed, and every later bfloat16 fit was refused).
        with torch.inference_mode(False), torch.enable_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
            output, _ = recurrence(torch.zeros(1, 2, 1))
            output.float().sum().backward()
    except RuntimeError:  # oneDNN: "could not create a primitive descriptor ..."
        return False
    return True


class FusedCell(Cell):
    """A cell of PyTorch's fused recurrent kernels, with an identity input for temporal gradients.

    Subclasses set :attr:`module` (the :class:`torch.nn.RNNBase` class), :attr:`kernel`
    (its functional kernel, e.g. :func:`torch.gru`) and implement :meth:`stepwise`.
    The recurrence is the module over ``gates * hidden_size`` inputs whose input
    weights are frozen (``requires_grad=False``) and set to the identity by
    :meth:`reset_parameters`; the cells without :attr:`has_recurrent_bias` have no bias
    of their own (the projection's bias is the only one: a second would be redundant).

    Examples
    --------
    >>> from sklearn_rnn.nn import get_cell
    >>> lstm = get_cell("lstm").make_recurrence(4, device="meta")
    >>> tuple(lstm.weight_ih_l0.shape), lstm.weight_ih_l0.requires_grad
    ((16, 16), False)
    """

    temporal_gradients = True
    writes_every_value = True
    module: type[nn.RNNBase] = nn.RNNBase
    kernel: Callable[..., tuple[torch.Tensor, ...]]
    module_options: dict[str, Any] = {}

    def runs_bfloat16_on_cpu(self) -> bool:
        """Whether PyTorch's fused kernel runs under bfloat16 autocast on this CPU:
        oneDNN has no bfloat16 LSTM without bfloat16 instructions (such as AVX-512 BF16
        or AMX). One forward and backward pass of a one-unit module, once per process.

        Returns
        -------
        bool
        """
        return _fused_runs_bfloat16_on_cpu(self.module)

    def make_recurrence(
        self, hidden_size: int, *, n_masked: int = 0, device: torch.device | str | None = None
    ) -> nn.RNNBase:
        """The fused module over ``gates * hidden_size`` projected inputs (see the class).

        Parameters
        ----------
        hidden_size : int
        n_masked : int, default=0
            Unused.
        device : torch.device or str, optional

        Returns
        -------
        torch.nn.RNNBase
        """
        width = self.gates * hidden_size
        recurrence = self.module(
            width, hidden_size, bias=self.has_recurrent_bias, batch_first=True, device=device,
            **self.module_options,
        )
        for parameter in self.frozen_parameters(recurrence):
            parameter.requires_grad_(False)
        return recurrence

    def frozen_parameters(self, recurrence: nn.Module) -> list[nn.Parameter]:
        """The fused module's input weights (the identity) and, for a cell with a
        recurrent bias, its input bias (zero): the network's input projection is the
        cell's ``W_in`` and ``b`` (see :meth:`Cell.frozen_parameters`).

        Parameters
        ----------
        recurrence : torch.nn.RNNBase

        Returns
        -------
        list of torch.nn.Parameter
        """
        frozen = [recurrence.weight_ih_l0]
        if self.has_recurrent_bias:
            frozen.append(recurrence.bias_ih_l0)
        return frozen

    def reset_parameters(
        self,
        projection: nn.Linear,
        recurrence: nn.Module,
        *,
        spectral_radius: float | None,
        generator: torch.Generator | None,
    ) -> None:
        """Initialize one layer (thesis algorithm 3.1, extended to gated cells).

        With a ``spectral_radius``, ``W_rec`` is Gaussian and **each gate block**
        (``W_hr, W_hz, W_hn`` of the GRU; ``W_hi, W_hf, W_hg, W_ho`` of the LSTM) is
        rescaled to that radius on its own: each block is a square map of ``h_{t-1}``
        into one gate, the only square matrices whose eigenvalues say how that gate's
        input grows or shrinks over steps (the stacked ``(G * H, H)`` matrix has no
        spectrum); rescaling the stack as a whole, say by its largest singular value,
        would leave the candidate block, the one carrying the state like the Elman
        ``W_rec``, at a radius that depends on the others. ``W_in`` is drawn from
        ``N(0, 0.1^2)``, biases are zero. Without a radius, PyTorch's defaults: uniform
        in ``±1/sqrt(fan_in)`` for the projection, ``±1/sqrt(hidden_size)`` for the
        recurrence (``b_hh`` included). The input weights are set to the identity.

        Draw order: ``W_rec`` then ``W_in`` (spectral), or ``W_in``, ``b``, ``W_rec``
        then ``b_hh`` (uniform), as the one-layer Elman network always drew them.

        Parameters
        ----------
        projection : torch.nn.Linear
        recurrence : torch.nn.RNNBase
            From :meth:`make_recurrence`.
        spectral_radius : float or None
        generator : torch.Generator or None
            A CPU generator; the global one when None.

        Examples
        --------
        >>> import torch
        >>> from sklearn_rnn.nn import get_cell
        >>> gru = get_cell("gru")
        >>> projection, recurrence = torch.nn.Linear(2, 9), gru.make_recurrence(3)
        >>> gru.reset_parameters(projection, recurrence, spectral_radius=1.2,
        ...                      generator=torch.Generator().manual_seed(0))
        >>> [round(torch.linalg.eigvals(w.double()).abs().max().item(), 4)
        ...  for w in recurrence.weight_hh_l0.detach().split(3)]
        [1.2, 1.2, 1.2]
        """
        bias_hh = self.recurrent_bias(recurrence)
        with torch.no_grad():
            recurrence.weight_ih_l0.copy_(torch.eye(recurrence.input_size, device="cpu"))
            if bias_hh is not None:
                recurrence.bias_ih_l0.zero_()
            reset_affine_(projection, recurrence.weight_hh_l0, spectral_radius, generator)
            if bias_hh is None:
                return
            if spectral_radius is None:
                uniform_(bias_hh, 1 / math.sqrt(recurrence.hidden_size), generator)
            else:
                bias_hh.zero_()

    def recurrent_weight(self, recurrence: nn.Module) -> nn.Parameter:  # noqa: D102
        return recurrence.weight_hh_l0

    def recurrent_bias(self, recurrence: nn.Module) -> torch.Tensor | None:  # noqa: D102
        return recurrence.bias_hh_l0 if self.has_recurrent_bias else None

    def forward_states(
        self,
        projection: nn.Linear,
        recurrence: nn.Module,
        z: torch.Tensor,
        initial: tuple[torch.Tensor, ...],
        gaps: torch.Tensor | None,
        *,
        lengths: torch.Tensor | None = None,
    ) -> LayerStates:
        """Project, then run the recurrence so that the gradient of ``u`` is every delta.

        On a GPU: the fused (cuDNN) kernel with identity input weights, whose product
        with the identity is one large matrix product over all steps. Elsewhere: the
        step-by-step recurrence of :func:`stepwise_recurrence`, the same function
        without identity products (for an LSTM of 50 units on a CPU, the
        identity-input kernel costs about twice the plain one; see
        ``docs/performance.rst``).

        Parameters
        ----------
        projection : torch.nn.Linear
            ``W_in``, ``b``.
        recurrence : torch.nn.RNNBase
            From :meth:`make_recurrence`.
        z : torch.Tensor of shape (batch, steps, n_inputs)
            The layer's inputs.
        initial : tuple of torch.Tensor of shape (batch, hidden_size)
            ``(h_0,)`` or ``(h_0, c_0)``; ``()`` for zero.
        gaps : None
            Unused.
        lengths : torch.Tensor of shape (batch,), optional
            Valid steps of each sequence, where the network passes them (a cell without
            :attr:`~Cell.bounded_state`): each sequence's state stops at its end, zeros
            at its padded steps.

        Returns
        -------
        LayerStates

        Examples
        --------
        >>> import torch
        >>> from sklearn_rnn.nn import get_cell
        >>> lstm = get_cell("lstm")
        >>> projection, recurrence = torch.nn.Linear(2, 12), lstm.make_recurrence(3)
        >>> lstm.reset_parameters(projection, recurrence, spectral_radius=1.2, generator=None)
        >>> z = torch.randn(4, 6, 2)
        >>> states = lstm.forward_states(projection, recurrence, z, (), None)
        >>> states.hidden.shape
        torch.Size([4, 6, 3])
        >>> torch.allclose(lstm.forward(projection, recurrence, z, (), None), states.hidden, atol=1e-6)
        True
        """
        projected = projection(z)  # (B, T, G * H)
        if not projected.is_cuda:
            # On a CPU, a loop over steps with a hand-written backward pass, whose gradient
            # of u is the deltas without any identity product (several times cheaper for
            # gated cells); on a GPU the fused kernel batches that product over all steps.
            bias_hh = self.recurrent_bias(recurrence)
            u, hidden, resets = stepwise_recurrence(
                self, projected, recurrence.weight_hh_l0, bias_hh, initial, lengths=lengths
            )
            return LayerStates(z, u, hidden, initial, resets)
        hx = self._hx(initial, z, recurrence.hidden_size)
        # The module's own (flattened, on cuDNN) weights, called as forward calls the
        # kernel: training mode whenever gradients are on, so that a network in eval mode
        # (dropout off) still gets its temporal gradients on a GPU.
        weights = recurrence.all_weights[0]  # [I, W_hh] (+ [0, b_hh] for the GRU)
        hidden = self._kernel(projected, hx, weights, recurrence.bias, lengths)  # (B, T, H)
        return LayerStates(z, projected, hidden, initial)

    def forward(
        self,
        projection: nn.Linear,
        recurrence: nn.Module,
        z: torch.Tensor,
        initial: tuple[torch.Tensor, ...],
        gaps: torch.Tensor | None,
        *,
        lengths: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """The same layer in one fused call on ``z``, with ``W_in`` as the input weights.

        Parameters
        ----------
        projection, recurrence, z, initial, gaps, lengths
            As for :meth:`forward_states`.

        Returns
        -------
        torch.Tensor of shape (batch, steps, hidden_size)
            The states ``h_t``, as :meth:`forward_states` computes them (up to rounding).

        Notes
        -----
        A cell that sets :attr:`~Cell.trains_stepwise` (the GRU and both Elman cells)
        trains on a CPU with the step-by-step recurrence of :meth:`forward_states`
        instead (gradients on, no autocast): at 50 units and 20-300 steps, one thread,
        its forward and hand-written backward pass cost 0.63-0.81 of the fused kernel's
        for the GRU, 0.71-0.75 for tanh and 0.60-0.78 for relu
        (``benchmarks/bench_recurrence.py``).
        Prediction, mixed precision and GPUs keep the fused kernel.
        """
        if self.trains_stepwise and _stepwise_training(z):
            return self.forward_states(projection, recurrence, z, initial, gaps, lengths=lengths).hidden
        if z.device.type == "cpu" and (functorch_transforms_active() or forward_ad_active()):
            # Plain tensor operations, which every torch.func transform and forward-mode
            # AD differentiate: oneDNN's float32 LSTM kernel has no forward-mode derivative.
            return self.forward_vectorizable(projection, recurrence, z, initial, gaps, lengths=lengths)
        bias_hh = self.recurrent_bias(recurrence)
        if bias_hh is None:
            bias_hh = torch.zeros_like(projection.bias)  # (G * H,)
        weights = [projection.weight, recurrence.weight_hh_l0, projection.bias, bias_hh]
        hx = self._hx(initial, z, recurrence.hidden_size)
        return self._kernel(z, hx, weights, True, lengths)  # (B, T, H)

    def _kernel(
        self,
        x: torch.Tensor,
        hx: torch.Tensor | tuple[torch.Tensor, ...],
        weights: list[torch.Tensor],
        has_biases: bool,
        lengths: torch.Tensor | None,
    ) -> torch.Tensor:
        """The fused kernel's states over right-padded ``x``, ``(B, T, H)``; given
        ``lengths``, with each sequence's state stopped at its end (zeros after it).

        The kernel runs over the padding, and its states there are replaced by zeros:
        the valid steps' values are those of a call without ``lengths``. Its backward
        pass reads those states, though, where a zero gradient times an overflowed state
        is NaN: with gradients on, a batch whose states did not all stay finite runs
        again packed (:func:`torch.nn.utils.rnn.pack_padded_sequence`), which stops there.
        """
        grad = torch.is_grad_enabled()
        # train=True keeps what cuDNN's backward needs; the kernel's own dropout is 0.
        hidden = _quiet(self.kernel, x, hx, weights, has_biases, 1, 0.0, grad, False, True)[0]
        if lengths is None:
            return hidden
        # Not under a torch.func transform, where a value read (data-dependent control
        # flow) is refused: there the states stay as the kernel gave them.
        if grad and not functorch_transforms_active() and not bool(hidden.isfinite().all()):
            packed = nn.utils.rnn.pack_padded_sequence(x, lengths.cpu(), batch_first=True, enforce_sorted=False)
            order = packed.sorted_indices
            hx = tuple(h.index_select(1, order) for h in hx) if isinstance(hx, tuple) else hx.index_select(1, order)
            args = (packed.data, packed.batch_sizes, hx, weights, has_biases, 1, 0.0, grad, False)
            data = _quiet(self.kernel, *args)[0]
            states = nn.utils.rnn.PackedSequence(data, packed.batch_sizes, order, packed.unsorted_indices)
            hidden = nn.utils.rnn.pad_packed_sequence(states, batch_first=True, total_length=x.shape[1])[0]
        return _zero_padding(hidden, lengths)

    def forward_vectorizable(
        self,
        projection: nn.Linear,
        recurrence: nn.Module,
        z: torch.Tensor,
        initial: tuple[torch.Tensor, ...],
        gaps: torch.Tensor | None,
        *,
        lengths: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """The same layer as :meth:`forward`, a loop over steps of :meth:`step` in plain tensor operations.

        The fused kernel's function (its equations, gate order and parameters), written
        so that :func:`torch.func.vmap` vectorizes it over models: the stacked trainer
        runs it (:attr:`~sklearn_rnn.nn.RecurrentNetwork.vectorizable`). Slower than
        the fused kernel for one network, so ``fit`` and prediction never use it.

        Parameters
        ----------
        projection, recurrence, z, initial, gaps, lengths
            As for :meth:`forward_states`.

        Returns
        -------
        torch.Tensor of shape (batch, steps, hidden_size)
            The states ``h_t``, as :meth:`forward` computes them (up to rounding).

        Examples
        --------
        >>> import torch
        >>> from sklearn_rnn.nn import get_cell
        >>> gru = get_cell("gru")
        >>> projection, recurrence = torch.nn.Linear(2, 9), gru.make_recurrence(3)
        >>> gru.reset_parameters(projection, recurrence, spectral_radius=None, generator=None)
        >>> z = torch.randn(4, 6, 2)
        >>> torch.allclose(gru.forward_vectorizable(projection, recurrence, z, (), None),
        ...                gru.forward(projection, recurrence, z, (), None), atol=1e-6)
        True
        """
        return self.forward_states_vectorizable(projection, recurrence, z, initial, gaps, lengths=lengths).hidden

    def forward_states_vectorizable(
        self,
        projection: nn.Linear,
        recurrence: nn.Module,
        z: torch.Tensor,
        initial: tuple[torch.Tensor, ...],
        gaps: torch.Tensor | None,
        *,
        lengths: torch.Tensor | None = None,
    ) -> LayerStates:
        """Project, then run the loop of :meth:`step`: the gradient of ``u`` is every delta.

        The same :class:`LayerStates` as :meth:`forward_states` (``resets`` None), in
        plain tensor operations that :func:`torch.func.vmap` vectorizes.

        Parameters
        ----------
        projection, recurrence, z, initial, gaps, lengths
            As for :meth:`forward_states`.

        Returns
        -------
        LayerStates
        """
        projected = projection(z)  # (B, T, G * H): every gate's input part, b included
        weight = self.recurrent_weight(recurrence)  # (G * H, H)
        bias = self.recurrent_bias(recurrence)  # (G * H,) or None
        _check_initial(self, initial, z.shape[0], recurrence.hidden_size)
        if initial:
            state = initial
        else:
            zeros = projected.new_zeros(z.shape[0], recurrence.hidden_size)  # (B, H)
            state = (zeros,) * self.state_count
        # A mask at every step: under vmap the lengths differ by model, so none is skipped.
        padded = None if lengths is None else padded_steps(lengths, z.shape[1], z.device).unbind(0)
        hidden = []
        for t, u in enumerate(projected.unbind(1)):  # (B, G * H) each
            state = self.step(u, state, weight, bias)
            if padded is not None:  # the state stopped at each sequence's end
                state = tuple(part.masked_fill(padded[t], 0.0) for part in state)
            hidden.append(state[0])
        return LayerStates(z, projected, torch.stack(hidden, dim=1), initial)  # hidden: (B, T, H)

    def step(
        self,
        u: torch.Tensor,
        state: tuple[torch.Tensor, ...],
        weight: torch.Tensor,
        bias: torch.Tensor | None,
    ) -> tuple[torch.Tensor, ...]:
        """One step of the recurrence in plain tensor operations (see :meth:`forward_vectorizable`).

        A cell that sets :attr:`~Cell.stackable` defines it.

        Parameters
        ----------
        u : torch.Tensor of shape (batch, gates * hidden)
            The step's projected inputs.
        state : tuple of torch.Tensor of shape (batch, hidden)
            ``(h_{t-1},)``, or ``(h_{t-1}, c_{t-1})`` for the LSTM.
        weight : torch.Tensor of shape (gates * hidden, hidden)
            ``W_hh``.
        bias : torch.Tensor of shape (gates * hidden,) or None
            ``b_hh`` of a cell that :attr:`~Cell.has_recurrent_bias`.

        Returns
        -------
        tuple of torch.Tensor of shape (batch, hidden)
            The new state, ``h_t`` first.
        """
        raise ValueError(
            f"cell={self.name!r} has no step in plain tensor operations, so the stacked trainer "
            f"cannot run it; the cells it runs are {cell_names(stackable=True)}."
        )

    def _hx(
        self, initial: tuple[torch.Tensor, ...], z: torch.Tensor, hidden_size: int
    ) -> torch.Tensor | tuple[torch.Tensor, ...]:
        """The fused kernels' ``hx``: ``(1, B, H)``, a pair of them for the LSTM."""
        _check_initial(self, initial, z.shape[0], hidden_size)
        if initial:
            states = [state.unsqueeze(0) for state in initial]  # (1, B, H) each
        else:
            zeros = z.new_zeros(1, z.shape[0], hidden_size)  # (1, B, H)
            states = [zeros] * self.state_count
        return tuple(states) if self.state_count > 1 else states[0]


def _check_initial(cell: Cell, initial: tuple[torch.Tensor, ...], batch: int, hidden: int) -> None:
    """Refuse an ``initial`` that is not ``()`` or the cell's states, each ``(batch, hidden)``.

    Every path checks it: the fused kernels read ``hx`` unchecked (a short LSTM state
    read memory past its end; PyTorch's ``(1, batch, hidden)`` layout broadcast a tanh
    layer's states to four dimensions).
    """
    if not isinstance(initial, (tuple, list)) or len(initial) not in (0, cell.state_count):
        states = "(h_0,)" if cell.state_count == 1 else "(h_0, c_0)"
        got = f"{len(initial)} tensor(s)" if isinstance(initial, (tuple, list)) else type(initial).__name__
        raise ValueError(
            f"initial must be () for a zero initial state or {states} for cell={cell.name!r}; "
            f"got {got}."
        )
    if not all(isinstance(state, torch.Tensor) for state in initial):
        kinds = [type(state).__name__ for state in initial]
        raise TypeError(f"initial must hold tensors for cell={cell.name!r}; got {kinds}.")
    expected = (batch, hidden)
    shapes = [tuple(state.shape) for state in initial]
    if any(shape != expected for shape in shapes):  # PyTorch's hx is (layers, batch, hidden)
        raise ValueError(
            f"initial must hold tensors of shape (batch, hidden) = {expected}, one row per "
            f"sequence; got shapes {shapes}. A torch.nn.RNN's hx of shape (1, batch, hidden) "
            "is its [0]."
        )


def _stepwise_training(z: torch.Tensor) -> bool:
    """Whether a layer's forward pass on ``z`` is a CPU training pass in the tensors'
    own dtype (gradients on, autocast off), where :attr:`Cell.trains_stepwise` applies."""
    if z.device.type != "cpu" or not torch.is_grad_enabled():
        return False
    if functorch_transforms_active():  # torch.func (jacrev, grad, vmap) runs no autograd.Function
        return False  # without a setup_context; the fused kernel has PyTorch's own rules
    if forward_ad_active():  # forward-mode AD: the hand-written pass has no jvp, the kernel has
        return False
    return not autocast_on("cpu")


def autocast_casts(x: torch.Tensor, *weights: torch.dtype) -> bool:
    """Whether :func:`torch.autocast` runs on ``x``'s device and casts ``x`` there, and
    the ``weights`` dtypes with it: float32, float16 or bfloat16 (never float64, nor
    integers), which the dtype checks of a network's input then let through (float64
    weights met a bfloat16 input in a raw matrix-product error)."""
    cast = (torch.float32, torch.float16, torch.bfloat16)
    return autocast_on(x.device.type) and x.dtype in cast and all(dtype in cast for dtype in weights)


def autocast_on(device: str) -> bool:
    """Whether :func:`torch.autocast` runs on ``device`` (``'cpu'``, ``'cuda'``), which
    casts each operation's inputs to its dtype."""
    try:
        return torch.is_autocast_enabled(device)
    except TypeError:  # torch < 2.4: no device argument
        return torch.is_autocast_enabled() if device == "cuda" else torch.is_autocast_cpu_enabled()


def stepwise_recurrence(
    cell: Cell | str,
    projected: torch.Tensor,
    weight_hh: torch.Tensor,
    bias_hh: torch.Tensor | None,
    initial: tuple[torch.Tensor, ...],
    *,
    lengths: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """Run a cell over ``u = projected``, step by step, with a hand-written backward pass.

    The gradient of the returned ``u`` is exactly the delta of every gate pre-activation
    at every step, as with the identity-input fused kernel, without its identity
    products (see :mod:`sklearn_rnn.nn.cells._stepwise`). Computed in the dtype of
    ``weight_hh``, with autocast off.

    Parameters
    ----------
    cell : Cell or str
        A cell with :attr:`Cell.temporal_gradients`, or its name.
    projected : torch.Tensor of shape (batch, steps, gates * hidden)
        ``u_t = W_in z_t + b``, every gate's input part.
    weight_hh : torch.Tensor of shape (gates * hidden, hidden)
        The stacked recurrent matrices.
    bias_hh : torch.Tensor of shape (gates * hidden,) or None
        The recurrent bias of a cell that :attr:`~Cell.has_recurrent_bias` (the GRU's
        candidate ``b_hn`` sits inside the reset gate); None for the other cells.
    initial : tuple of torch.Tensor of shape (batch, hidden)
        ``(h_0,)``, or ``(h_0, c_0)`` for the LSTM; ``()`` for zero.
    lengths : torch.Tensor of shape (batch,), optional
        Valid steps of each sequence, for a cell without a bounded state
        (:attr:`Cell.bounded_state`): its recurrence stops each sequence's state at its
        end (zeros at its padded steps). The other cells run over the padding, where
        their states stay bounded and nothing reads them.

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
    >>> from sklearn_rnn.nn.cells import stepwise_recurrence
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
    stepwise = cell_names(temporal_gradients=True)
    if isinstance(cell, str):
        if cell not in stepwise:
            raise ValueError(f"cell must be one of {stepwise}; got {cell!r}.")
        cell = CELLS[cell]
    if not cell.temporal_gradients:
        raise ValueError(f"cell must be one of {stepwise}; got {cell.name!r}.")
    if not isinstance(weight_hh, torch.Tensor) or weight_hh.ndim != 2 or (
        weight_hh.shape[0] != cell.gates * weight_hh.shape[1]
    ):
        shape = tuple(weight_hh.shape) if isinstance(weight_hh, torch.Tensor) else type(weight_hh).__name__
        raise ValueError(
            f"weight_hh must be a tensor of shape ({cell.gates} * hidden, hidden) for cell="
            f"{cell.name!r}, the recurrent weights of its {cell.gates} gate block(s) (a "
            f"module's weight_hh_l0, not weight_ih_l0); got {shape}."
        )
    width, hidden = weight_hh.shape
    if projected.ndim != 3 or projected.shape[2] != width:
        raise ValueError(
            f"projected must have shape (batch, steps, {width}) for a {cell.name!r} cell of "
            f"{hidden} units; got {tuple(projected.shape)}."
        )
    if cell.has_recurrent_bias and bias_hh is None:
        raise ValueError(
            f"bias_hh is required for cell={cell.name!r}, whose recurrence keeps a bias of its "
            "own (the GRU's candidate reads it through the reset gate); got None."
        )
    if not cell.has_recurrent_bias and bias_hh is not None:
        raise ValueError(
            f"bias_hh must be None for cell={cell.name!r}: only "
            f"{cell_names(has_recurrent_bias=True)} keep a recurrent bias of their own, None "
            "for the others (add the module's b_hh to u); got a tensor."
        )
    if bias_hh is not None and tuple(bias_hh.shape) != (width,):
        raise ValueError(
            f"bias_hh must have shape ({width},), one per row of weight_hh; got {tuple(bias_hh.shape)}."
        )
    if lengths is not None and (not isinstance(lengths, torch.Tensor) or tuple(lengths.shape) != projected.shape[:1]):
        shape = tuple(lengths.shape) if isinstance(lengths, torch.Tensor) else type(lengths).__name__
        raise ValueError(
            f"lengths must be a tensor of shape (batch,) = ({projected.shape[0]},), each "
            f"sequence's valid steps; got {shape} (a list: torch.as_tensor(lengths))."
        )
    if lengths is not None and lengths.device.type == "cpu" and not functorch_transforms_active():
        # Their values too, as the network checks them (a boolean length read as 1, a
        # fractional one as the next step, 0 stopped even a given initial state).
        lengths = check_lengths(lengths, projected.shape[0], projected.shape[1])
    _check_initial(cell, initial, projected.shape[0], hidden)
    if functorch_transforms_active():  # its autograd.Functions have no setup_context
        raise once_differentiable_error(cell, "apply a torch.func transform to")
    if has_tangent(projected, weight_hh, bias_hh, *initial):  # its autograd.Functions have no jvp
        raise once_differentiable_error(cell, "compute a forward-mode derivative (jvp) of")
    dtype = weight_hh.dtype
    h0 = initial[0].to(dtype) if initial else None
    c0 = initial[1].to(dtype) if len(initial) > 1 else None
    if bias_hh is not None:
        bias_hh = bias_hh.to(dtype)
    record = Record(cell)
    if lengths is not None and lengths.numel():  # an empty batch has nothing to stop
        steps = projected.shape[1]
        record.stop = int(lengths.min())  # no step before the shortest sequence's end is padded
        if record.stop < steps:
            record.padded = padded_steps(lengths, steps, projected.device)
    u = RecurrentWeights.apply(projected.to(dtype), weight_hh, bias_hh, record)
    weight = weight_hh.detach()  # its gradient comes from RecurrentWeights
    bias = None if bias_hh is None else bias_hh.detach()
    hidden_states = cell.stepwise(u, weight, bias, h0, c0, record)
    return u, hidden_states, record.resets


def reset_affine_(
    projection: nn.Linear, weight_hh: torch.Tensor, spectral_radius: float | None, generator: torch.Generator | None
) -> None:
    """``W_in``, ``b`` and ``W_rec`` of one layer: thesis algorithm 3.1, or PyTorch's uniform draws.

    With a ``spectral_radius``: ``W_rec`` Gaussian rescaled to that radius (block by
    block for a stack of gate blocks), then ``W_in`` from ``N(0, 0.1^2)`` and ``b = 0``.
    Without: ``W_in`` and ``b`` uniform in ``±1/sqrt(fan_in)``, then ``W_rec`` uniform
    in ``±1/sqrt(hidden_size)``.

    Parameters
    ----------
    projection : torch.nn.Linear
    weight_hh : torch.Tensor of shape (gates * hidden_size, hidden_size)
    spectral_radius : float or None
    generator : torch.Generator or None
    """
    with torch.no_grad():
        if spectral_radius is None:
            bound = 1 / math.sqrt(projection.in_features)
            uniform_(projection.weight, bound, generator)
            uniform_(projection.bias, bound, generator)
            uniform_(weight_hh, 1 / math.sqrt(weight_hh.shape[1]), generator)
            return
        spectral_radius_(weight_hh, spectral_radius, generator=generator)
        normal_(projection.weight, 0.1, generator)
        projection.bias.zero_()


def _zero_padding(x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """``x`` with zeros at each sequence's padded steps: padding the caller filled with
    NaN or infinities reaches no output, nor (as zero times NaN) any weight's gradient.
    About 8 us for a batch of 32 x 18 steps of one feature."""
    valid = torch.arange(x.shape[1], device=x.device) < lengths.to(x.device)[:, None]  # (B, T)
    return x.masked_fill(~valid[..., None], 0.0)


def _check_initial_kept(cell: Cell, initial: tuple[torch.Tensor, ...], layer: object) -> None:
    """Refuse a layer's states whose ``initial`` are not the learned initial states it was
    given: a cell that does not start its recurrence from them (a user's cell written
    without them, ``learned_initial`` left at its default) trained a state that does
    nothing (no effect on the outputs, no gradient)."""
    kept = getattr(layer, "initial", ())
    if initial and (len(kept) != len(initial) or any(a is not b for a, b in zip(kept, initial))):
        raise ValueError(
            f"cell {cell.name!r} was given learned initial states (hidden_init='learned'), but its "
            f"forward_states returned LayerStates.initial of {len(kept)} other tensor(s) instead of "
            "the ones it was given: a cell must start its recurrence from `initial` and return "
            "them, or set learned_initial = False (hidden_init='learned' is then refused)."
        )


def _checked_hidden(
    cell: Cell, method: str, result: object, z: torch.Tensor, hidden_size: int | None = None
) -> torch.Tensor:
    """The states ``(batch, steps, hidden_size)`` in what ``cell``'s ``method`` returned
    for the layer inputs ``z`` (a :class:`LayerStates`' ``hidden`` for the methods of
    the states, else the tensor itself), after checking that it keeps the contract: a
    custom cell's slip failed later on a missing attribute or an index, or not at all
    (time-major states of a batch as long as its steps). ``hidden_size`` None: any."""
    states = "states" in method  # forward_states and its vectorizable form: a LayerStates
    hidden = result.hidden if isinstance(result, LayerStates) else result
    typed = states == isinstance(result, LayerStates) and isinstance(hidden, torch.Tensor)
    if typed and hidden.ndim == 3 and hidden.shape[:2] == z.shape[:2] and hidden_size in (None, hidden.shape[2]):
        if hidden.dtype != z.dtype and not autocast_on(z.device.type):  # met a raw error in the readout
            raise ValueError(
                f"cell={cell.name!r}: {type(cell).__name__}.{method} must return the layer's "
                f"states in its inputs' dtype, {z.dtype} (outside autocast); got {hidden.dtype}."
            )
        return hidden
    contract = (
        f"cell={cell.name!r}: {type(cell).__name__}.{method} must return "
        f"{'a LayerStates whose hidden is' if states else 'a tensor of'} the layer's states, batch-first, "
        f"(batch, steps, hidden_size) = ({z.shape[0]}, {z.shape[1]}, {hidden_size or 'hidden_size'})"
    )
    if typed:
        raise ValueError(f"{contract}; got states of shape {tuple(hidden.shape)}.")
    got = type(result).__name__ if hidden is result else f"a LayerStates whose hidden is {type(hidden).__name__}"
    raise TypeError(f"{contract}; got {got}.")


def _given(lengths: torch.Tensor | None) -> dict[str, torch.Tensor]:
    """The ``lengths=`` keyword to pass on where it was given: a cell whose state is
    bounded is never given it, and its :meth:`Cell.forward_states` may not take it."""
    return {} if lengths is None else {"lengths": lengths}


def _is_int(value: object) -> bool:
    """Whether ``value`` is a whole number of Python's or numpy's (not a bool)."""
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def uniform_(tensor: torch.Tensor, bound: float, generator: torch.Generator | None) -> None:
    """Fill with ``U(-bound, bound)``, drawn on the CPU in float64.

    Parameters
    ----------
    tensor : torch.Tensor
    bound : float
    generator : torch.Generator or None
    """
    draw = torch.rand(tensor.shape, generator=generator, dtype=torch.float64, device="cpu")
    tensor.copy_((2 * draw - 1) * bound)


def normal_(tensor: torch.Tensor, std: float, generator: torch.Generator | None) -> None:
    """Fill with ``N(0, std^2)``, drawn on the CPU in float64.

    Parameters
    ----------
    tensor : torch.Tensor
    std : float
    generator : torch.Generator or None
    """
    tensor.copy_(torch.randn(tensor.shape, generator=generator, dtype=torch.float64, device="cpu") * std)


def _quiet(function: Callable[..., tuple[torch.Tensor, ...]], *args: object) -> tuple[torch.Tensor, ...]:
    """Call a fused kernel; on a GPU without the warning about weights outside one flat
    buffer, and under bfloat16 autocast in float32.

    PyTorch's autocast runs cuDNN's recurrence in float16 whatever autocast's dtype
    (seen on an H100 with torch 2.11): under bfloat16, which has no loss scaler, its
    gradients would be float16's unscaled ones. The recurrence runs in float32 there
    instead; the layers around it keep bfloat16.
    """
    first = args[0]
    if not (isinstance(first, torch.Tensor) and first.is_cuda):
        return function(*args)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=_NOT_FLAT)
        if autocast_on("cuda") and _autocast_dtype("cuda") == torch.bfloat16:
            with torch.autocast("cuda", enabled=False):
                return function(*(_in_float32(arg) for arg in args))
        return function(*args)


def _autocast_dtype(device: str) -> torch.dtype:
    try:
        return torch.get_autocast_dtype(device)
    except AttributeError:  # torch < 2.4
        return torch.get_autocast_gpu_dtype() if device == "cuda" else torch.get_autocast_cpu_dtype()


def _in_float32(arg: object) -> object:
    """A kernel argument with its floating-point tensors in float32 (lists and tuples of
    them too, e.g. the LSTM's ``(h, c)`` and the weights)."""
    if isinstance(arg, torch.Tensor):
        return arg.float() if arg.is_floating_point() else arg
    if isinstance(arg, (list, tuple)):
        return type(arg)(_in_float32(item) for item in arg)
    return arg


# ------------------------------------------------------------------ the registry
def _cell_identity(cell: Cell | None) -> dict[str, Any] | None:
    """What identifies a cell beyond its name: its class's name and the plain settings
    of the instance (an :class:`~sklearn_rnn.nn.cells.ElmanCell`'s nonlinearity), not
    the switches every cell has (``trains_stepwise``, ``stackable``, ...: how it is run,
    not what it computes) nor the class's module (``__main__`` in a script is
    ``__mp_main__`` in its spawned workers); None for None."""
    if cell is None:
        return None

    def plain(value: Any) -> bool:
        if isinstance(value, (list, tuple)):
            return all(plain(item) for item in value)
        if isinstance(value, dict):
            return all(isinstance(key, str) and plain(item) for key, item in value.items())
        return value is None or isinstance(value, (bool, int, float, str))

    switches = set(dir(Cell))  # the attributes every cell has (name included)
    settings = {name: list(value) if isinstance(value, tuple) else value
                for name, value in sorted(vars(cell).items()) if name not in switches and plain(value)}
    return {"class": type(cell).__qualname__, "settings": settings}


def _same_identity(first: dict[str, Any] | None, second: dict[str, Any] | None) -> bool:
    """Whether two :func:`_cell_identity` values are one cell's: compared as text, so that
    a NaN setting equals itself (a cell with one was refused as another cell)."""
    return repr(first) == repr(second)


def _identity_text(identity: dict[str, Any]) -> str:
    """A cell's :func:`_cell_identity` as a message shows it."""
    settings = ", ".join(f"{key}={value!r}" for key, value in identity["settings"].items())
    return f"{identity['class']}({settings})"


#: The package's own cells by name, set once they are registered (cells/__init__.py).
_PACKAGE_CELLS: dict[str, Cell] = {}


def _recorded_identity(cell: Cell) -> dict[str, Any] | None:
    """What a model file records of ``cell`` beyond its name: the identity of a user's
    cell (:func:`_cell_identity`), None for one of the package's own cell objects (a
    user's cell registered under a package cell's name, after unregister_cell, is the
    user's: its file loaded in another session as the package's cell, silently)."""
    return None if _PACKAGE_CELLS.get(cell.name) is cell else _cell_identity(cell)


def _registration_change(cell: Cell) -> str | None:
    """How the registry's cell of ``cell``'s name now differs from ``cell`` (which a
    network kept running since), as a message says it; None when it does not."""
    registered = CELLS.get(cell.name)
    if registered is cell or _same_identity(_cell_identity(registered), _cell_identity(cell)):
        return None
    if registered is None:
        return "is no longer registered in this session"
    return f"is registered in this session as {_identity_text(_cell_identity(registered))}"


def _replaced_package_cell(name: str) -> Cell | None:
    """The cell registered as ``name`` where it replaced the package's own cell of that
    name by another recurrence (unregister_cell, then register_cell of the user's): a
    model of the package's cell records no identity, and ran the user's silently."""
    package, registered = _PACKAGE_CELLS.get(name), CELLS.get(name)
    if package is None or registered is None or registered is package:
        return None
    return None if _same_identity(_cell_identity(registered), _cell_identity(package)) else registered


def _registered_as(name: str, identity: dict[str, Any] | None = None) -> Cell:
    """The registered cell ``name``, refused when it is not the cell of ``identity``
    (:func:`_cell_identity`; None: the package's own cell of that name): how a pickled
    network finds its cell again."""
    if name not in CELLS and identity is not None:
        raise ValueError(
            f"a pickled network ran the cell {name!r} as {_identity_text(identity)}, which is "
            f"not registered in this session (the cells are {sorted(CELLS)}): import the module "
            "that registers it (with sklearn_rnn.nn.register_cell) before unpickling."
        )
    cell = get_cell(name)
    replaced = _replaced_package_cell(name) if identity is None else None
    if replaced is not None:
        raise ValueError(
            f"a pickled network ran the package's cell {name!r}, but this session registers that "
            f"name as {_identity_text(_cell_identity(replaced))}: its weights would run another "
            "recurrence. Unregister that cell (sklearn_rnn.nn.unregister_cell) and unpickle in a "
            "session where the name is the package's cell."
        )
    if identity is not None and not _same_identity(_cell_identity(cell), identity):
        raise ValueError(
            f"a pickled network ran the cell {name!r} as {_identity_text(identity)}, but this "
            f"session registers that name as {_identity_text(_cell_identity(cell))}: its weights "
            "would run another recurrence. Register the cell it ran under that name "
            "(sklearn_rnn.nn.unregister_cell, then register_cell) before unpickling."
        )
    return cell


def register_cell(cell: Cell) -> Cell:
    """Add ``cell`` to :data:`CELLS`, so that ``cell=cell.name`` selects it everywhere.

    Parameters
    ----------
    cell : Cell
        An instance; its :attr:`~Cell.name` must be new, and not 'auto' (the
        estimators' choice of a cell).

    Returns
    -------
    Cell
        ``cell``.

    Examples
    --------
    >>> from sklearn_rnn.nn import get_cell, register_cell, unregister_cell
    >>> from sklearn_rnn.nn.cells import ElmanCell
    >>> register_cell(ElmanCell("tanh_copy", nonlinearity="tanh"))
    ElmanCell(name='tanh_copy')
    >>> get_cell("tanh_copy").gates
    1
    >>> unregister_cell("tanh_copy")
    """
    if not isinstance(cell, Cell):
        raise TypeError(f"register_cell expects a sklearn_rnn.nn.Cell instance; got {type(cell).__name__}.")
    if not cell.name or not isinstance(cell.name, str):
        raise ValueError(f"a cell needs a non-empty str name; got {cell.name!r}.")
    if cell.name == "auto":
        raise ValueError(
            "a cell cannot be named 'auto': the estimators read cell='auto' as their choice "
            "among the registered cells (by the time feature and the optimizer); choose another name."
        )
    if cell.name in CELLS:
        raise ValueError(
            f"a cell named {cell.name!r} is already registered ({CELLS.get(cell.name)!r}); "
            "choose another name, or unregister_cell it first."
        )
    CELLS[cell.name] = cell
    return cell


def unregister_cell(name: str) -> None:
    """Remove the cell ``name`` from :data:`CELLS`.

    Parameters
    ----------
    name : str

    Examples
    --------
    >>> from sklearn_rnn.nn import unregister_cell
    >>> unregister_cell("no such cell")
    Traceback (most recent call last):
    ...
    ValueError: no cell named 'no such cell' is registered...
    """
    if name not in CELLS:
        raise ValueError(f"no cell named {name!r} is registered; the cells are {sorted(CELLS)}.")
    del CELLS[name]


def get_cell(name: str) -> Cell:
    """The registered cell ``name``.

    Parameters
    ----------
    name : str

    Returns
    -------
    Cell

    Examples
    --------
    >>> from sklearn_rnn.nn import get_cell
    >>> get_cell("lstm").gates
    4
    >>> get_cell("elman")
    Traceback (most recent call last):
    ...
    ValueError: cell must be one of ['decay', 'gru', 'lstm', 'relu', 'tanh']; got 'elman'.
    """
    if not isinstance(name, str) or name not in CELLS:
        raise ValueError(f"cell must be one of {sorted(CELLS)}; got {name!r}.")
    return CELLS[name]


def cell_of_module(module: nn.RNNBase) -> Cell:
    """The registered cell whose fused kernel ``module`` runs (by its ``mode``).

    Parameters
    ----------
    module : torch.nn.RNN, torch.nn.GRU or torch.nn.LSTM

    Returns
    -------
    Cell

    Examples
    --------
    >>> import torch
    >>> from sklearn_rnn.nn.cells import cell_of_module
    >>> cell_of_module(torch.nn.RNN(2, 3, nonlinearity="relu")).name
    'relu'
    """
    for cell in CELLS.values():
        if cell.torch_mode == module.mode and cell.temporal_gradients:
            return cell
    raise ValueError(f"no registered cell runs a torch.nn module of mode {module.mode!r}.")


def cell_names(**attributes: Any) -> list[str]:
    """Names of the registered cells whose attributes have the given values, in registration order.

    Parameters
    ----------
    **attributes
        :class:`Cell` attributes and the values to select, e.g. ``stackable=True``.

    Returns
    -------
    list of str

    Examples
    --------
    >>> from sklearn_rnn.nn.cells import cell_names
    >>> cell_names(temporal_gradients=True)
    ['tanh', 'relu', 'gru', 'lstm']
    """
    return [
        name for name, cell in CELLS.items()
        if all(getattr(cell, key) == value for key, value in attributes.items())
    ]


class CellNames(Set):
    """The registered cells' names and some fixed extra values, read from :data:`CELLS` at each use.

    For parameter validation that sees a cell registered after the estimator class
    was defined.

    Parameters
    ----------
    *extra : str
        Values accepted besides the cells' names (such as ``'auto'``).

    Examples
    --------
    >>> from sklearn_rnn.nn.cells import CellNames
    >>> names = CellNames("auto")
    >>> "auto" in names, "gru" in names, "elman" in names
    (True, True, False)
    """

    def __init__(self, *extra: str) -> None:
        self.extra = extra

    @classmethod
    def _from_iterable(cls, iterable: Any) -> frozenset:
        # Set operations (``deprecated - options`` in scikit-learn) give a plain set.
        return frozenset(iterable)

    def __contains__(self, value: object) -> bool:
        return value in self.extra or value in CELLS

    def __iter__(self) -> Iterator[str]:
        return iter([*self.extra, *CELLS])

    def __len__(self) -> int:
        return len(self.extra) + len(CELLS)
