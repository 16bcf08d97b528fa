"""From validated sequences to what the network reads: no NaN, a mask where values are missing."""

from __future__ import annotations

import numpy as np
import torch

from ._batching import FlatSequences

__all__ = ["InputEncoder"]


class InputEncoder:
    """Turn canonical sequences into network inputs.

    A missing value (NaN inside a sequence) is replaced by the last observed value of
    that feature in the same sequence, or by the feature's training mean before the
    first observation; when the training data had missing values, one mask channel
    per feature (1 observed, 0 missing) is appended, so the network can tell a filled
    value from a measured one. The network never sees a NaN.

    Parameters
    ----------
    n_features : int
        Features per step of the raw sequences.
    fill_values : ndarray of shape (n_features,)
        Training mean of each feature over observed steps.
    use_mask : bool
        Append mask channels.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_rnn.sequences import InputEncoder
    >>> encoder = InputEncoder.fit([np.array([[1.0], [np.nan], [3.0]]), np.array([[np.nan]])])
    >>> encoder.n_inputs
    2
    >>> encoder.encode_arrays([np.array([[np.nan], [5.0], [np.nan]])])[0]
    array([[2., 0.],
           [5., 1.],
           [5., 0.]])
    """

    def __init__(self, n_features: int, fill_values: np.ndarray, use_mask: bool) -> None:
        self.n_features = n_features
        self.fill_values = fill_values
        self.use_mask = use_mask

    @classmethod
    def fit(cls, sequences: list[np.ndarray]) -> InputEncoder:
        """Learn fill values and whether masks are needed from training sequences.

        Parameters
        ----------
        sequences : list of ndarray of shape (T_i, d)
            Canonical training sequences.

        Returns
        -------
        InputEncoder
        """
        steps = np.concatenate(sequences, axis=0)  # (N, d)
        observed = ~np.isnan(steps)
        counts = observed.sum(axis=0)
        sums = np.where(observed, steps, 0.0).sum(axis=0)
        fill_values = np.divide(sums, counts, out=np.zeros(steps.shape[1]), where=counts > 0)
        return cls(steps.shape[1], fill_values, bool((~observed).any()))

    @property
    def n_inputs(self) -> int:
        """Channels the network reads per step."""
        return self.n_features * (2 if self.use_mask else 1)

    def encode_arrays(self, sequences: list[np.ndarray]) -> list[np.ndarray]:
        """Encode into a list of ``(T_i, n_inputs)`` arrays.

        Parameters
        ----------
        sequences : list of ndarray of shape (T_i, n_features)

        Returns
        -------
        list of ndarray of shape (T_i, n_inputs)
        """
        lengths = np.array([len(sequence) for sequence in sequences])
        steps = self._encode_steps(np.concatenate(sequences, axis=0), lengths)
        return np.split(steps, np.cumsum(lengths)[:-1])

    def encode(
        self,
        sequences: list[np.ndarray],
        *,
        dtype: torch.dtype = torch.float32,
        device: torch.device | str = "cpu",
    ) -> FlatSequences:
        """Encode into :class:`FlatSequences` on ``device``.

        Parameters
        ----------
        sequences : list of ndarray of shape (T_i, n_features)
        dtype : torch.dtype, default=torch.float32
        device : torch.device or str, default='cpu'

        Returns
        -------
        FlatSequences
        """
        lengths = np.array([len(sequence) for sequence in sequences])
        steps = self._encode_steps(np.concatenate(sequences, axis=0), lengths)
        return FlatSequences(
            torch.as_tensor(steps, dtype=dtype, device=device),
            torch.as_tensor(lengths, device=device),
        )

    def _encode_steps(self, steps: np.ndarray, lengths: np.ndarray) -> np.ndarray:
        observed = ~np.isnan(steps)  # (N, d)
        if observed.all():
            return steps if not self.use_mask else np.hstack([steps, observed.astype(float)])
        starts = np.repeat(np.cumsum(lengths) - lengths, lengths)  # (N,) first row of each step's sequence
        rows = np.arange(len(steps))[:, None]
        last_seen = np.maximum.accumulate(np.where(observed, rows, -1), axis=0)  # (N, d)
        carried = last_seen >= starts[:, None]  # an observation earlier in the same sequence
        source = steps[np.maximum(last_seen, 0), np.arange(steps.shape[1])]
        filled = np.where(carried, source, self.fill_values)
        if not self.use_mask:
            return filled
        return np.hstack([filled, observed.astype(float)])
