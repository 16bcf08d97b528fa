"""Per-step deltas of the recurrent parameters of every cell, from one backward pass.

:class:`~sklearn_rnn.nn.RecurrentNetwork` feeds each layer's fused recurrence with
``u_t = W_in z_t + b``, all gate pre-activations' input parts, through identity input
weights. The gradient of ``u`` is then ``delta_t``, the delta of every gate
pre-activation; the recurrent part of each pre-activation reads ``h_{t-1}``:

* Elman (``tanh``, ``relu``): ``a_t = u_t + W_rec h_{t-1}``, so
  ``W_rec|t = delta_t h_{t-1}^T``;
* LSTM (gates ``i, f, g, o``): ``a_t = u_t + W_hh h_{t-1}`` for every gate, so again
  ``W_hh|t = delta_t h_{t-1}^T``;
* GRU (gates ``r, z, n``): the reset and update gates read ``u + W_h h_{t-1} + b_h``,
  but the candidate reads ``u_n + r_t * (W_hn h_{t-1} + b_hn)``: its recurrent part is
  gated, so ``[W_hn | b_hn]|t = (delta_n,t * r_t) [h_{t-1}; 1]^T``, with ``r_t`` as
  the CPU's step-by-step recurrence kept it, or, after a fused kernel (on a GPU),
  recomputed for all steps at once from the stored ``u`` and ``h_{t-1}`` (one batched
  product, no loop over steps). ``b_hr`` and ``b_hz`` add to ``u`` exactly as ``b`` does:
  their temporal gradients equal those of ``b``'s first two blocks.

:func:`recurrent_deltas` returns the delta that multiplies ``[h_{t-1}; 1]``.
"""

from __future__ import annotations

import torch

__all__ = ["recurrent_deltas"]


def recurrent_deltas(
    cell: str,
    delta: torch.Tensor,
    projected: torch.Tensor,
    previous: torch.Tensor,
    weight_hh: torch.Tensor,
    bias_hh: torch.Tensor | None,
    reset: torch.Tensor | None = None,
) -> torch.Tensor:
    """Delta of the recurrent part ``W_hh h_{t-1} (+ b_hh)`` of every step.

    Parameters
    ----------
    cell : {'tanh', 'relu', 'gru', 'lstm'}
    delta : torch.Tensor of shape (steps, batch, gates * hidden)
        ``dL/du``, time-major.
    projected : torch.Tensor of shape (steps, batch, gates * hidden)
        ``u``, time-major (only read for the GRU).
    previous : torch.Tensor of shape (steps, batch, hidden)
        ``h_{t-1}`` of every step (``h_0`` at the first).
    weight_hh : torch.Tensor of shape (gates * hidden, hidden)
    bias_hh : torch.Tensor of shape (gates * hidden,) or None
        The GRU's ``b_hh``; None for the other cells.
    reset : torch.Tensor of shape (steps, batch, hidden), optional
        The GRU's reset gate ``r_t`` as the forward pass computed it (the CPU's
        step-by-step recurrence keeps it); recomputed from ``u`` and ``h_{t-1}``, one
        batched product, when None (after the fused kernels).

    Returns
    -------
    torch.Tensor of shape (steps, batch, gates * hidden)
        ``delta`` itself for the Elman cells and the LSTM.

    Examples
    --------
    >>> import torch
    >>> from sklearn_rnn.optim._gated import recurrent_deltas
    >>> delta, u = torch.ones(2, 1, 6), torch.zeros(2, 1, 6)  # GRU, hidden 2
    >>> previous, w = torch.zeros(2, 1, 2), torch.zeros(6, 2)
    >>> recurrent_deltas("gru", delta, u, previous, w, torch.zeros(6))[0, 0]  # r = 1/2
    tensor([1.0000, 1.0000, 1.0000, 1.0000, 0.5000, 0.5000])
    """
    if cell != "gru":
        return delta
    hidden = previous.shape[2]
    if reset is None:
        w_hr = weight_hh[:hidden]  # (H, H)
        b_hr = bias_hh[:hidden] if bias_hh is not None else 0.0
        reset = torch.sigmoid(projected[..., :hidden] + previous @ w_hr.T + b_hr)  # (T, B, H)
    # Padded steps may hold non-finite values; their delta is zero and stays zero.
    reset = torch.nan_to_num(reset, nan=0.0)
    candidate = delta[..., 2 * hidden :] * reset  # (T, B, H)
    return torch.cat([delta[..., : 2 * hidden], candidate], dim=2)  # (T, B, 3H)
