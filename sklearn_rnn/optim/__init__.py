"""Optimizers of the thesis, usable with plain PyTorch code.

* :class:`ClippedSGD`: the anti-gradient with the clipped step of eq. 3.6.
* :func:`temporal_gradients` and :class:`SimplexSGD`: every step's gradient in one
  backward pass, and descent along their normalized random convex combination with
  conditional switching to the anti-gradient (thesis chapter 3, algorithm 3.2)::

      states = net.forward_states(x, lengths)
      loss = criterion(states.outputs, y)
      opt.zero_grad()
      opt.step(temporal_gradients(net, states, loss, lengths))

* :class:`RecurrentAdapter`: the same for a plain :class:`torch.nn.RNN`,
  :class:`torch.nn.GRU` or :class:`torch.nn.LSTM` and its linear readout
  (``net = RecurrentAdapter(gru, head)`` in place of ``net`` above).
* The functional core of the direction (:func:`simplex_direction` and its parts), on
  plain tensors.
"""

from ._adapter import RecurrentAdapter
from ._clipped import ClippedSGD
from ._functional import (
    BRANCHES,
    WEIGHT_RULES,
    Direction,
    choose_direction,
    clipped_step_,
    clipped_step_size,
    combine_temporal_gradients,
    convex_weights,
    normalization_factors,
    normalize_temporal_gradients,
    simplex_direction,
    step_norms,
)
from ._simplex import SimplexSGD
from ._temporal import TemporalGradients, temporal_gradients

__all__ = [
    "BRANCHES",
    "ClippedSGD",
    "Direction",
    "RecurrentAdapter",
    "SimplexSGD",
    "TemporalGradients",
    "WEIGHT_RULES",
    "choose_direction",
    "clipped_step_",
    "clipped_step_size",
    "combine_temporal_gradients",
    "convex_weights",
    "normalization_factors",
    "normalize_temporal_gradients",
    "simplex_direction",
    "step_norms",
    "temporal_gradients",
]
