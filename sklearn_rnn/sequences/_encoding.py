"""From validated sequences to what the network reads: no NaN, masks, time gaps."""

from __future__ import annotations

import numpy as np
import torch

from ._batching import FlatSequences
from ._validation import joined_steps

__all__ = ["InputEncoder", "check_times"]


class InputEncoder:
    """Turn canonical sequences into network inputs.

    A missing value (NaN inside a sequence) is replaced by the last observed value of
    that feature in the same sequence, or by the feature's training mean before the
    first observation; when the training data had missing values, one mask channel
    per feature (1 observed, 0 missing) is appended, so the network can tell a filled
    value from a measured one. The network never sees a NaN.

    With a time column (``time_feature``), that column is not an ordinary feature:
    it is removed from the values and replaced by two channels appended last, the
    **gap** since the previous step (0 at the first step) and the **elapsed** time
    since the sequence's first step, both divided by ``time_scale``, the median of
    the positive gaps between consecutive training steps. Dividing by a training
    statistic in the same unit makes the encoding unit-free (days, years or
    standardized times give the same channels), keeps a gap of 0 meaning "at the same
    time" (what a decay with the gap needs) and puts a typical gap at 1. Raw time
    stamps are never given to the network: they have an arbitrary origin.

    Channel layout of each step: ``[values (n_values), masks (n_masked), gap,
    elapsed]``, the last two only with a time column.

    Parameters
    ----------
    n_features : int
        Features per step of the raw sequences, the time column included.
    fill_values : ndarray of shape (n_values,)
        Training mean of each value feature (time column excluded) over observed steps.
    use_mask : bool
        Append mask channels.
    time_feature : int or None, default=None
        Index of the time column in the raw sequences (non-negative).
    time_scale : float, default=1.0
        Unit of the time channels, in the unit of the time column.

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

    A time column (here column 0, in days) becomes the gap and elapsed channels:

    >>> visits = np.array([[0.0, 1.2], [180.0, 1.5], [540.0, 2.0]])
    >>> encoder = InputEncoder.fit([visits], time_feature=0)
    >>> encoder.time_scale, encoder.gap_channel
    (270.0, 1)
    >>> encoder.encode_arrays([visits])[0]
    array([[1.2 , 0.  , 0.  ],
           [1.5 , 0.67, 0.67],
           [2.  , 1.33, 2.  ]])
    """

    def __init__(
        self,
        n_features: int,
        fill_values: np.ndarray,
        use_mask: bool,
        time_feature: int | None = None,
        time_scale: float = 1.0,
    ) -> None:
        self.n_features = n_features
        self.fill_values = fill_values
        self.use_mask = use_mask
        self.time_feature = time_feature
        self.time_scale = time_scale

    @classmethod
    def fit(cls, sequences: list[np.ndarray], *, time_feature: int | None = None) -> InputEncoder:
        """Learn fill values, whether masks are needed and the time scale.

        Parameters
        ----------
        sequences : list of ndarray of shape (T_i, d)
            Canonical training sequences.
        time_feature : int or None, default=None
            Index of the column holding each step's time stamp (negative indices count
            from the end); None when the sequences have no time column.

        Returns
        -------
        InputEncoder

        Raises
        ------
        ValueError
            ``time_feature`` out of range, or a time that is missing or decreases
            within a sequence (the message names the sequence and step).
        """
        n_features = sequences[0].shape[1]
        time_feature = _resolve_time_feature(time_feature, n_features)
        time_scale = 1.0
        if time_feature is not None:
            steps, lengths, _ = joined_steps(sequences)
            times = steps[:, time_feature]
            check_times(sequences, time_feature, joined=(times, lengths))
            gaps = step_gaps(times, lengths)
            positive = gaps[gaps > 0]  # not the zeros of first steps
            # No positive gap (single steps, or repeated times): any scale gives 0 gaps.
            time_scale = float(np.median(positive)) if positive.size else 1.0
        steps = _values(np.concatenate(sequences, axis=0), time_feature)  # (N, n_values)
        observed = ~np.isnan(steps)
        counts = observed.sum(axis=0)
        sums = np.where(observed, steps, 0.0).sum(axis=0)
        fill_values = np.divide(sums, counts, out=np.zeros(steps.shape[1]), where=counts > 0)
        return cls(n_features, fill_values, bool((~observed).any()), time_feature, time_scale)

    @property
    def n_values(self) -> int:
        """Value channels: the features other than the time column."""
        return self.n_features - (self.time_feature is not None)

    @property
    def n_masked(self) -> int:
        """Mask channels, one per value channel when masks are used (else 0)."""
        return self.n_values if self.use_mask else 0

    @property
    def gap_channel(self) -> int | None:
        """Index of the gap channel in the encoded steps (elapsed time follows it)."""
        return None if self.time_feature is None else self.n_values + self.n_masked

    @property
    def n_inputs(self) -> int:
        """Channels the network reads per step."""
        return self.n_values + self.n_masked + (0 if self.time_feature is None else 2)

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
        steps = self._encode_steps(sequences, np.concatenate(sequences, axis=0), lengths)
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
        raw, lengths, shared = joined_steps(sequences)  # checked sequences: not joined again
        steps = self._encode_steps(sequences, raw, lengths)
        values = torch.as_tensor(steps, dtype=dtype, device=device)
        if shared and steps is raw and values.device.type == "cpu" and values.dtype == torch.float64:
            values = values.clone()  # not the sequences' own memory
        return FlatSequences(values, torch.as_tensor(lengths, device=device))

    def _encode_steps(
        self, sequences: list[np.ndarray], raw: np.ndarray, lengths: np.ndarray
    ) -> np.ndarray:
        """Encode ``raw``, the ``(N, n_features)`` steps of ``sequences`` joined."""
        values = self._fill(_values(raw, self.time_feature), lengths)  # (N, n_values [+ masks])
        if self.time_feature is None:
            return values
        check_times(sequences, self.time_feature, joined=(raw[:, self.time_feature], lengths))
        return np.hstack([values, self._time_channels(raw[:, self.time_feature], lengths)])

    def _fill(self, steps: np.ndarray, lengths: np.ndarray) -> np.ndarray:
        observed = ~np.isnan(steps)  # (N, n_values)
        if observed.all():
            return steps if not self.use_mask else np.hstack([steps, observed.astype(float)])
        starts = np.repeat(np.cumsum(lengths) - lengths, lengths)  # (N,) first row of each step's sequence
        rows = np.arange(len(steps))[:, None]
        last_seen = np.maximum.accumulate(np.where(observed, rows, -1), axis=0)  # (N, n_values)
        carried = last_seen >= starts[:, None]  # an observation earlier in the same sequence
        source = steps[np.maximum(last_seen, 0), np.arange(steps.shape[1])]
        filled = np.where(carried, source, self.fill_values)
        if not self.use_mask:
            return filled
        return np.hstack([filled, observed.astype(float)])

    def _time_channels(self, times: np.ndarray, lengths: np.ndarray) -> np.ndarray:
        starts = np.cumsum(lengths) - lengths  # (n,) first row of each sequence
        elapsed = times - np.repeat(times[starts], lengths)  # (N,)
        return np.column_stack([step_gaps(times, lengths), elapsed]) / self.time_scale  # (N, 2)


def _values(steps: np.ndarray, time_feature: int | None) -> np.ndarray:
    """The columns of ``steps`` other than the time column."""
    return steps if time_feature is None else np.delete(steps, time_feature, axis=1)


def _resolve_time_feature(time_feature: int | None, n_features: int) -> int | None:
    if time_feature is None:
        return None
    if not -n_features <= time_feature < n_features:
        raise ValueError(
            f"time_feature={time_feature} is out of range: X has {n_features} features per "
            f"step, so expected an index in [{-n_features}, {n_features - 1}]. Pass the "
            "index of the column that holds each step's time stamp, or None."
        )
    return int(time_feature) % n_features


def check_times(
    sequences: list[np.ndarray],
    time_feature: int,
    *,
    joined: tuple[np.ndarray, np.ndarray] | None = None,
) -> None:
    """Check that every step has a time and that times never decrease within a sequence.

    Parameters
    ----------
    sequences : list of ndarray of shape (T_i, d)
        Canonical sequences.
    time_feature : int
        Index of the time column.
    joined : tuple of ndarray, optional
        ``(times, lengths)``: the time column of all steps joined in order and each
        sequence's length, when the caller has them (they are not joined again).

    Raises
    ------
    ValueError
        Naming the first sequence and step with a missing (NaN) or decreasing time.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_rnn.sequences._encoding import check_times
    >>> check_times([np.array([[0.0, 1.0], [2.0, 1.5], [2.0, 0.3]])], 0)
    >>> check_times([np.array([[0.0], [3.0]]), np.array([[5.0], [4.0]])], 0)
    Traceback (most recent call last):
    ...
    ValueError: sequence 1 of X has times that decrease at step 1 (4 after 5) ...
    """
    if joined is None:
        steps, lengths, _ = joined_steps(sequences)
        times = steps[:, time_feature]
    else:
        times, lengths = joined
    ends = np.cumsum(lengths)

    def first(flags: np.ndarray) -> tuple[int, int, int]:
        """The first flagged row of the joined steps: (row, sequence, step in it)."""
        row = int(np.argmax(flags))
        index = int(np.searchsorted(ends, row, side="right"))
        return row, index, row - int(ends[index] - lengths[index])

    missing = np.isnan(times)
    if missing.any():
        _, index, step = first(missing)
        raise ValueError(
            f"sequence {index} of X has no time at step {step} "
            f"(NaN in column time_feature={time_feature}): expected a time stamp at every "
            "step. Drop the steps without a time, or fill in their times."
        )
    decreasing = step_gaps(times, lengths) < 0
    if decreasing.any():
        row, index, step = first(decreasing)  # the step whose time is lower
        raise ValueError(
            f"sequence {index} of X has times that decrease at step {step} "
            f"({times[row]:g} after {times[row - 1]:g}) in column "
            f"time_feature={time_feature}: expected non-decreasing times within each "
            "sequence. Sort each sequence's steps by time. (These are the values the "
            "estimator received: a scaler before it in a pipeline changes them, not "
            "their order.)"
        )


def step_gaps(times: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The time since the previous step of the same sequence, for every step; 0 at each
    sequence's first step.

    Parameters
    ----------
    times : ndarray of shape (N,)
        The time column of all steps, the sequences joined in order.
    lengths : ndarray of int of shape (n,)
        Each sequence's steps, every one at least 1.

    Returns
    -------
    ndarray of shape (N,)

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_rnn.sequences._encoding import step_gaps
    >>> step_gaps(np.array([0.0, 2.0, 3.0, 10.0, 11.5]), np.array([3, 2])).tolist()
    [0.0, 2.0, 1.0, 0.0, 1.5]
    """
    gaps = np.diff(times, prepend=times[:1])
    gaps[np.cumsum(lengths) - lengths] = 0.0  # no previous step in the same sequence
    return gaps
