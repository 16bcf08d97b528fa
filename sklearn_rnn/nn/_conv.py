"""A convolutional input stage: several kernel widths over time, read by the recurrence."""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import nn
from torch.nn import functional as F

from ._lengths import as_lengths, check_lengths
from .cells import uniform_
from .cells._base import _is_int, autocast_casts
from .cells._stepwise import functorch_transforms_active

__all__ = ["ConvStage"]

#: Above this many window values (batch x steps x inputs x the widest kernel), the stage
#: runs a convolution per width instead of one product over every step's window, whose
#: copy of the windows would be the kernel's width times the input: 2**24 values, 128 MB
#: in float64 (a batch of 32 sequences of 18 steps of one feature has 5,184).
WINDOW_LIMIT = 2**24


def _widths(kernel_sizes: Sequence[int], name: str) -> tuple:
    """The values of ``kernel_sizes`` as a tuple (any sequence: a numpy array too),
    refusing a lone width, which is no sequence, under the parameter's ``name``."""
    try:
        return tuple(kernel_sizes)
    except TypeError:  # 3, np.int64(3), np.array(3): "'int' object is not iterable"
        raise ValueError(
            f"{name} must be a sequence of kernel widths, such as (3, 9), or (3,) for one "
            f"width; got {kernel_sizes!r}, which is not a sequence: put a lone width in a tuple."
        ) from None


class ConvStage(nn.Module):
    """Convolutions over time of several widths, side by side, before the first layer.

    Each kernel width ``k`` gives ``channels`` features per step: a 1-D convolution of
    the inputs over the steps ``t - k // 2 .. t + (k - 1) // 2`` followed by a ReLU.
    The features of all widths are concatenated, so the recurrence reads
    ``len(kernel_sizes) * channels`` inputs per step. Steps beyond a sequence's length
    count as zeros (as the convolution's own border does), so a sequence's features do
    not depend on the other sequences of its batch. The window reaches ahead of step
    ``t``: the stage suits one output per sequence, not a target at every step.

    With ``pool=p`` the features are then max-pooled over consecutive windows of ``p``
    steps (the last window of a sequence may be shorter), so the recurrence runs over
    ``ceil(length / p)`` steps: ``p`` times fewer steps to carry a memory across and
    to pay for, each reading the strongest response of every feature in its window.

    Parameters
    ----------
    input_size : int
        Features per step.
    kernel_sizes : sequence of int
        The widths, in steps, each at least 1.
    channels : int
        Output features per width.
    pool : int, default=1
        Steps per max-pooling window; 1: none.
    device : str or None, default=None
        Where the kernels and biases are created (``'cpu'``, ``'cuda'``); None: PyTorch's
        default device.

    Attributes
    ----------
    kernel_sizes : tuple of int
        The widths.
    channels : int
        Output features per width.
    pool : int
        Steps per max-pooling window.
    output_size : int
        ``len(kernel_sizes) * channels``.
    convolutions : torch.nn.ModuleList of torch.nn.Conv1d
        The kernels and biases, one module per width, in the order of
        ``kernel_sizes`` (the parameters a saved model holds); :meth:`forward` applies
        them all in one product over windows of steps.

    Examples
    --------
    >>> import torch
    >>> from sklearn_rnn.nn import ConvStage
    >>> stage = ConvStage(3, (3, 9), 8)
    >>> stage.reset_parameters(torch.Generator().manual_seed(0))
    >>> stage(torch.randn(4, 20, 3), torch.tensor([20, 15, 9, 1])).shape
    torch.Size([4, 20, 16])

    Pooled over pairs of steps, the recurrence reads half as many:

    >>> pooled = ConvStage(3, (3, 9), 8, pool=2)
    >>> pooled.reset_parameters(torch.Generator().manual_seed(0))
    >>> pooled(torch.randn(4, 20, 3), torch.tensor([20, 15, 9, 1])).shape
    torch.Size([4, 10, 16])
    >>> pooled.output_lengths(torch.tensor([20, 15, 9, 1]))
    tensor([10,  8,  5,  1])
    """

    def __init__(
        self,
        input_size: int,
        kernel_sizes: Sequence[int],
        channels: int,
        *,
        pool: int = 1,
        device: str | None = None,
    ) -> None:
        super().__init__()
        if not (_is_int(input_size) and input_size >= 1):
            raise ValueError(
                f"a convolutional stage reads input_size features, a positive int; got "
                f"input_size={input_size!r}."
            )
        given = _widths(kernel_sizes, "kernel_sizes") if not isinstance(kernel_sizes, (str, bytes)) else (kernel_sizes,)
        if not all(_is_int(value) for value in (*given, channels, pool)):  # 2.7 read as 2, '35' as (3, 5)
            raise ValueError(
                "a convolutional stage's kernel widths, channels and pooling window are whole "
                f"numbers; got kernel_sizes={kernel_sizes!r}, channels={channels!r}, pool={pool!r}."
            )
        sizes = tuple(int(size) for size in given)
        if not sizes or min(sizes) < 1 or int(channels) < 1 or int(pool) < 1:
            raise ValueError(
                "a convolutional stage needs at least one kernel width of at least 1 step, "
                "at least 1 channel and pooling windows of at least 1 step; got "
                f"kernel_sizes={tuple(kernel_sizes)!r}, channels={channels!r}, pool={pool!r}."
            )
        self.kernel_sizes = sizes
        self.channels = int(channels)
        self.pool = int(pool)
        self.output_size = len(sizes) * self.channels
        self.convolutions = nn.ModuleList(
            nn.Conv1d(int(input_size), self.channels, size, padding=size // 2, device=device) for size in sizes
        )

    def _checked(self, x: torch.Tensor, lengths: torch.Tensor | Sequence[int]) -> torch.Tensor:
        """``lengths`` as a tensor, after checking ``x`` and them (a wrong width met
        "mat1 and mat2 shapes cannot be multiplied", a list of lengths an AttributeError)."""
        weight = self.convolutions[0].weight
        width = weight.shape[1]
        if not isinstance(x, torch.Tensor) or x.ndim != 3 or x.shape[2] != width:
            shape = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
            raise ValueError(
                f"x must be a padded batch of shape (batch, steps, {width}), the stage's "
                f"input_size features; got {shape}."
            )
        if x.dtype != weight.dtype and not autocast_casts(x, weight.dtype):
            raise ValueError(f"x is {x.dtype}, but the stage's weights are {weight.dtype}: pass x.to({weight.dtype}).")
        lengths = as_lengths(lengths)  # a list's fractions kept for the check, not truncated
        if lengths.shape != (x.shape[0],):
            raise ValueError(
                f"lengths must hold one length per sequence, shape ({x.shape[0]},); got "
                f"{tuple(lengths.shape)}."
            )
        # Their values as the network checks them (integers in [1, steps]), where reading
        # them costs no wait for a device and no torch.func transform runs.
        if lengths.device.type == "cpu" and not functorch_transforms_active():
            lengths = check_lengths(lengths, x.shape[0], x.shape[1])
        return lengths

    def reset_parameters(self, generator: torch.Generator | None = None) -> None:
        """Draw the kernels and biases from ``U(-1/sqrt(fan_in), 1/sqrt(fan_in))``.

        ``fan_in`` is the input features times the kernel width, PyTorch's default bound
        for a convolution; the values come from ``generator``.

        Parameters
        ----------
        generator : torch.Generator, optional
            Source of randomness (a CPU generator); the global one when None.
        """
        with torch.no_grad():
            for convolution in self.convolutions:
                fan_in = convolution.in_channels * convolution.kernel_size[0]
                bound = 1 / math.sqrt(fan_in)
                uniform_(convolution.weight, bound, generator)
                uniform_(convolution.bias, bound, generator)

    def forward(self, x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """The features of every step, ``(batch, steps, output_size)``.

        Parameters
        ----------
        x : torch.Tensor of shape (batch, steps, input_size)
            Right-padded inputs; values at padded steps are ignored.
        lengths : torch.Tensor or sequence of int, of shape (batch,)
            Valid steps of each sequence.

        Returns
        -------
        torch.Tensor of shape (batch, ceil(steps / pool), output_size)
            Features at padded steps (beyond :meth:`output_lengths`) are not meaningful.

        Raises
        ------
        ValueError
            ``x`` not a ``(batch, steps, input_size)`` tensor in the stage's dtype (or
            one autocast casts), or ``lengths`` not one per sequence.
        """
        lengths = self._checked(x, lengths)
        steps = x.shape[1]
        if steps == 0:  # an empty batch of no steps: no windows to unfold
            return x.new_zeros(x.shape[0], 0, self.output_size)
        valid = torch.arange(steps, device=x.device) < lengths.to(x.device)[:, None]  # (B, T)
        signal = torch.where(valid[..., None], x, 0.0)  # (B, T, n_in)
        # Every width at once: one matrix product of the windows of the widest kernel
        # (steps t - K // 2 .. t + (K - 1) // 2) with all kernels, each zero-padded to K
        # taps around its own window. The same sums as a convolution per width; on short
        # sequences a third of the time, and the features come out step-major, as the
        # recurrence reads them.
        width = max(self.kernel_sizes)
        if signal.numel() * width > WINDOW_LIMIT:
            # Large batches: a convolution per width, whose memory is the features', not
            # the windows' (K times the input).
            signal_t = signal.transpose(1, 2)  # (B, n_in, T)
            features = torch.cat([
                F.conv1d(signal_t, convolution.weight, convolution.bias, padding=size // 2)[..., :steps]
                for convolution, size in zip(self.convolutions, self.kernel_sizes)
            ], dim=1).transpose(1, 2).relu()  # (B, T, out)
        else:
            ahead = width // 2
            windows = F.pad(signal, (0, 0, ahead, width - 1 - ahead)).unfold(1, width, 1)  # (B, T, n_in, K)
            features = torch.relu(F.linear(windows.flatten(2), self._kernel(width), self._bias()))  # (B, T, out)
        if self.pool > 1:
            # Zero (the ReLU's floor) at padded steps, so a window that a sequence's end
            # cuts short takes the maximum over its valid steps only.
            features = torch.where(valid[..., None], features, 0.0)
            features = F.pad(features, (0, 0, 0, -steps % self.pool))
            features = features.unflatten(1, (-1, self.pool)).amax(2)  # (B, T / pool, out)
        return features

    def _kernel(self, width: int) -> torch.Tensor:
        """All kernels as one matrix, ``(output_size, input_size * width)``: each width
        ``k`` zero-padded to ``width`` taps, its first tap at ``width // 2 - k // 2``."""
        padded = []
        for convolution, size in zip(self.convolutions, self.kernel_sizes):
            before = width // 2 - size // 2
            padded.append(F.pad(convolution.weight, (before, width - size - before)))
        kernel = padded[0] if len(padded) == 1 else torch.cat(padded)  # (out, n_in, K)
        return kernel.flatten(1)

    def _bias(self) -> torch.Tensor:
        biases = [convolution.bias for convolution in self.convolutions]
        return biases[0] if len(biases) == 1 else torch.cat(biases)

    def extra_repr(self) -> str:  # noqa: D102
        return f"kernel_sizes={self.kernel_sizes}, channels={self.channels}, pool={self.pool}"

    def output_lengths(self, lengths: torch.Tensor) -> torch.Tensor:
        """Valid steps of each sequence after pooling: ``ceil(lengths / pool)``.

        Parameters
        ----------
        lengths : torch.Tensor or sequence of int, of shape (batch,)
            Valid steps of each input sequence.

        Returns
        -------
        torch.Tensor of shape (batch,)
        """
        lengths = as_lengths(lengths)
        if lengths.device.type == "cpu" and lengths.numel() and not functorch_transforms_active() and (
            lengths.is_floating_point() or lengths.dtype == torch.bool or int(lengths.min()) < 1
        ):  # as forward refuses them (fractions and negatives came back as "lengths")
            raise ValueError(
                f"lengths must hold integer lengths of at least 1 step; got {lengths.tolist()} "
                f"({lengths.dtype})."
            )
        return lengths if self.pool == 1 else torch.div(lengths + self.pool - 1, self.pool, rounding_mode="floor")
