"""The lengths of a padded batch, as the network and its convolutional stage read and
check them."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

__all__ = ["as_lengths", "check_lengths"]


#: Integer dtypes of lengths read as int64: a uint8 tensor indexes as a boolean mask
#: (the wrong step was read out), and narrow ones overflow in the stage's arithmetic.
_NARROW_INTEGERS = (torch.uint8, torch.int8, torch.int16,
                    # unsigned ones (numpy's uint arrays): PyTorch has no min/max of them
                    *(getattr(torch, name) for name in ("uint16", "uint32", "uint64") if hasattr(torch, name)))


def as_lengths(lengths: torch.Tensor | Sequence[int]) -> torch.Tensor:
    """``lengths`` as a tensor, with the integer dtypes of ``_NARROW_INTEGERS``
    (narrow and unsigned) widened to int64; other dtypes are left for the caller to check.

    Parameters
    ----------
    lengths : torch.Tensor, array-like or sequence of int

    Returns
    -------
    torch.Tensor

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_rnn.nn._lengths import as_lengths
    >>> as_lengths(np.array([4, 2], dtype=np.uint16))
    tensor([4, 2])
    """
    if not isinstance(lengths, torch.Tensor):
        expected = "lengths must hold one integer length per sequence of the batch"
        if not hasattr(lengths, "__len__") or isinstance(lengths, (str, bytes)) or np.ndim(lengths) == 0:
            number = isinstance(lengths, (int, np.integer)) and not isinstance(lengths, bool)
            fix = (f"For a batch of one sequence, pass [{lengths!r}]." if number else
                   "For sequences without padding, pass each one's steps, e.g. "
                   "torch.full((batch,), steps).")
            raise ValueError(f"{expected}; got {lengths!r}. {fix}")
        # An empty list as no lengths of an empty batch (torch reads [] as float32).
        try:
            lengths = torch.as_tensor(lengths) if len(lengths) else torch.zeros(0, dtype=torch.int64)
        except (TypeError, ValueError, RuntimeError) as error:  # [None], ['a']: "Could not infer dtype"
            raise ValueError(f"{expected}; got {lengths!r}, which holds other things ({error}).") from None
    if lengths.dtype in _NARROW_INTEGERS:  # uint8 indexes as a mask, and overflows
        lengths = lengths.long()
    return lengths


def check_lengths(lengths: torch.Tensor | Sequence[int], batch: int, steps: int) -> torch.Tensor:
    """``lengths`` as a tensor (:func:`as_lengths`), after checking that it holds one
    integer length per sequence of the batch, each between 1 and ``steps``: a fractional
    or boolean length would be truncated to another step. Reads the extremes, which on
    a GPU makes the host wait for the device.

    Parameters
    ----------
    lengths : torch.Tensor, array-like or sequence of int
    batch : int
        Sequences in the batch.
    steps : int
        The padded length.

    Returns
    -------
    torch.Tensor of shape (batch,)

    Raises
    ------
    ValueError
        For another shape, a floating or boolean dtype, or a length outside ``[1, steps]``.

    Examples
    --------
    >>> from sklearn_rnn.nn._lengths import check_lengths
    >>> check_lengths([4, 2], 2, 4)
    tensor([4, 2])
    >>> check_lengths([2.7, 4.0], 2, 4)
    Traceback (most recent call last):
    ...
    ValueError: lengths must hold one integer length per sequence (2), each between 1 and the padded length 4; got [2.7..., 4.0] (torch.float32).
    """
    lengths = as_lengths(lengths)
    if (
        lengths.shape != (batch,)
        or lengths.dtype.is_floating_point
        or lengths.dtype == torch.bool
        or (len(lengths) and not (1 <= int(lengths.min()) and int(lengths.max()) <= steps))
    ):
        raise ValueError(
            f"lengths must hold one integer length per sequence ({batch}), each "
            f"between 1 and the padded length {steps}; got {lengths.tolist()} "
            f"({lengths.dtype})."
        )
    return lengths
