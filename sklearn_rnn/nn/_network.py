"""The recurrent network: input projection, recurrence, readout."""

from __future__ import annotations

import math
from typing import NamedTuple

import torch
from torch import nn

from .init import spectral_radius_

__all__ = ["RecurrentNetwork", "NetworkStates", "CELLS"]

#: Recurrences available to :class:`RecurrentNetwork`, by name.
CELLS: dict[str, str] = {"tanh": "tanh", "relu": "relu"}


class NetworkStates(NamedTuple):
    """Intermediate tensors of one forward pass, for temporal-gradient computations.

    Attributes
    ----------
    inputs : torch.Tensor of shape (batch, steps, input_size)
        The (padded) inputs ``x_t``.
    projected : torch.Tensor of shape (batch, steps, hidden_size)
        ``u_t = W_in x_t + b``: the input part of each step's pre-activation. Its
        gradient is the pre-activation delta of each step.
    hidden : torch.Tensor of shape (batch, steps, hidden_size)
        The hidden states ``h_t``; padded steps hold values that no output uses.
    outputs : torch.Tensor
        The readout: ``(batch, output_size)`` at each sequence's last valid step, or
        ``(batch, steps, output_size)`` at every step.
    """

    inputs: torch.Tensor
    projected: torch.Tensor
    hidden: torch.Tensor
    outputs: torch.Tensor


class RecurrentNetwork(nn.Module):
    """Elman network of the thesis (eq. 1.30-1.34) on right-padded variable-length batches.

    ``u_t = W_in x_t + b``, ``h_t = f(u_t + W_rec h_{t-1})`` with ``h_0 = 0``, and a
    linear readout ``W_out h_t + b_out`` at each sequence's own last valid step (or at
    every step). The output non-linearity (softmax, identity) belongs to the loss.

    The input projection is computed outside the fused PyTorch recurrence, which runs
    with its input weights frozen to the identity: the forward pass costs the same as a
    plain :class:`torch.nn.RNN`, and the gradient of ``u`` is exactly the pre-activation
    delta of every step, from which all temporal gradients follow in one backward pass
    (see :mod:`sklearn_rnn.optim`).

    Parameters
    ----------
    input_size : int
        Features per time step.
    hidden_size : int
        Recurrent units.
    output_size : int
        Outputs of the readout.
    cell : {'tanh', 'relu'}, default='tanh'
        The recurrence non-linearity ``f``.
    spectral_radius : float or None, default=1.2
        Initialize as the thesis does (algorithm 3.1): ``W_rec`` Gaussian rescaled to
        this spectral radius, ``W_in`` and ``W_out`` from ``N(0, 0.1^2)``, biases zero.
        None keeps PyTorch's default initialization (uniform in ``±1/sqrt(hidden_size)``).
    generator : torch.Generator, optional
        Source of randomness for the initialization (a CPU generator).

    Examples
    --------
    >>> import torch
    >>> from sklearn_rnn.nn import RecurrentNetwork
    >>> net = RecurrentNetwork(3, 8, 2, generator=torch.Generator().manual_seed(0))
    >>> x = torch.randn(4, 5, 3)              # 4 sequences, padded to 5 steps
    >>> lengths = torch.tensor([5, 3, 2, 1])  # valid steps of each
    >>> net(x, lengths).shape
    torch.Size([4, 2])
    """

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        output_size: int,
        *,
        cell: str = "tanh",
        spectral_radius: float | None = 1.2,
        generator: torch.Generator | None = None,
    ) -> None:
        super().__init__()
        if cell not in CELLS:
            raise ValueError(f"cell must be one of {sorted(CELLS)}; got {cell!r}.")
        self.cell = cell
        self.spectral_radius = spectral_radius
        # Built uninitialized (meta device, then allocated): reset_parameters draws
        # every value from ``generator`` and leaves the global generator untouched.
        self.input_projection = nn.Linear(input_size, hidden_size, device="meta")
        self.recurrence = nn.RNN(
            hidden_size,
            hidden_size,
            nonlinearity=CELLS[cell],
            bias=False,
            batch_first=True,
            device="meta",
        )
        self.readout = nn.Linear(hidden_size, output_size, device="meta")
        self.to_empty(device="cpu")
        self.recurrence.weight_ih_l0.requires_grad_(False)
        self.reset_parameters(generator)

    @property
    def recurrent_weight(self) -> nn.Parameter:
        """The recurrent matrix ``W_rec`` of shape (hidden_size, hidden_size)."""
        return self.recurrence.weight_hh_l0

    def reset_parameters(self, generator: torch.Generator | None = None) -> None:
        """Draw every parameter anew from ``generator``.

        Parameters
        ----------
        generator : torch.Generator, optional
            Source of randomness (a CPU generator); the global one when None.
        """
        with torch.no_grad():
            self.recurrence.weight_ih_l0.copy_(torch.eye(self.recurrence.hidden_size))
            if self.spectral_radius is None:
                for layer in (self.input_projection, self.readout):
                    _uniform_(layer.weight, 1 / math.sqrt(layer.in_features), generator)
                    _uniform_(layer.bias, 1 / math.sqrt(layer.in_features), generator)
                bound = 1 / math.sqrt(self.recurrence.hidden_size)
                _uniform_(self.recurrent_weight, bound, generator)
            else:
                spectral_radius_(self.recurrent_weight, self.spectral_radius, generator=generator)
                for layer in (self.input_projection, self.readout):
                    _normal_(layer.weight, 0.1, generator)
                    layer.bias.zero_()

    def forward_states(
        self, x: torch.Tensor, lengths: torch.Tensor, *, every_step: bool = False
    ) -> NetworkStates:
        """Run the network and keep the tensors that temporal gradients need.

        Parameters
        ----------
        x : torch.Tensor of shape (batch, steps, input_size)
            Right-padded inputs; values at padded steps are ignored.
        lengths : torch.Tensor of shape (batch,)
            Valid steps of each sequence, between 1 and ``steps``.
        every_step : bool, default=False
            Read out at every step instead of each sequence's last valid step.

        Returns
        -------
        NetworkStates
        """
        projected = self.input_projection(x)  # (B, T, H)
        hidden, _ = self.recurrence(projected)  # (B, T, H); h_0 = 0
        if every_step:
            outputs = self.readout(hidden)  # (B, T, out)
        else:
            last = (lengths.to(hidden.device) - 1).clamp(min=0)  # (B,)
            final = hidden[torch.arange(hidden.shape[0], device=hidden.device), last]  # (B, H)
            outputs = self.readout(final)  # (B, out)
        return NetworkStates(x, projected, hidden, outputs)

    def forward(
        self, x: torch.Tensor, lengths: torch.Tensor, *, every_step: bool = False
    ) -> torch.Tensor:
        """Readout at each sequence's last valid step, ``(batch, output_size)``.

        Parameters
        ----------
        x : torch.Tensor of shape (batch, steps, input_size)
            Right-padded inputs.
        lengths : torch.Tensor of shape (batch,)
            Valid steps of each sequence.
        every_step : bool, default=False
            Return ``(batch, steps, output_size)``, the readout at every step.

        Returns
        -------
        torch.Tensor
        """
        return self.forward_states(x, lengths, every_step=every_step).outputs


def _uniform_(tensor: torch.Tensor, bound: float, generator: torch.Generator | None) -> None:
    draw = torch.rand(tensor.shape, generator=generator, dtype=torch.float64)
    tensor.copy_((2 * draw - 1) * bound)


def _normal_(tensor: torch.Tensor, std: float, generator: torch.Generator | None) -> None:
    tensor.copy_(torch.randn(tensor.shape, generator=generator, dtype=torch.float64) * std)
