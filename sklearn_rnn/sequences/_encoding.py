"""From validated sequences to what the network reads: no NaN, masks, time gaps."""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from numbers import Integral, Real
from typing import Any

import numpy as np
import torch
from sklearn.utils._param_validation import Interval

from .._gathered import outside_stacklevel
from ._batching import FlatSequences
from ._validation import check_step_arrays, joined_steps, number_text

__all__ = ["InputEncoder", "check_times"]


class InputEncoder:
    """Turn canonical sequences into network inputs.

    A missing value (NaN inside a sequence) is replaced by the last observed value of
    that feature in the same sequence, or by the feature's training mean before the
    first observation; when the training data had missing values, one mask channel
    per feature (1 observed, 0 missing) is appended, so the network can tell a filled
    value from a measured one. The network never sees a NaN. Sequences with missing
    values encoded by an encoder fitted without any (so without masks) are filled
    with a warning.

    With a time column (``time_feature``), that column is not an ordinary feature:
    it is removed from the values and replaced by two channels appended last, the
    **gap** since the previous step (0 at the first step) and the **elapsed** time
    since the sequence's first step, both divided by ``time_scale``, the median of
    the positive gaps between consecutive training steps. Dividing by a training
    statistic in the same unit makes the encoding unit-free (days, years or
    standardized times give the same channels), keeps a gap of 0 meaning "at the same
    time" (what a decay with the gap needs) and puts a typical gap at 1. Raw time
    stamps are never given to the network: they have an arbitrary origin. Training
    sequences with no positive gap (each one step long, or times that only repeat)
    give no scale to learn: ``time_scale`` is then 1, with a warning, and gaps met
    later are read in the time column's own unit.

    Value channels listed in ``scaled`` are read **per sequence**: each sequence's values
    of such a channel are centred on their own mean and divided by their own standard
    deviation (at least ``scale_floor``), so that its shape reaches the network whatever
    its amplitude, and the two statistics it loses come back as two channels constant
    along the sequence, its **level** (the mean) and the logarithm of its **scale** (the
    standard deviation), each standardized with the training sequences' mean and
    spread of them. Missing values are skipped by the statistics and stay missing in
    the scaled values (filled as above); a sequence with no observed value of the
    channel gets the training mean of its level and log scale.

    Channel layout of each step: ``[values (n_values), masks (n_masked), levels
    (n_scaled), log scales (n_scaled), gap, elapsed]``, the last two only with a time
    column.

    Parameters
    ----------
    n_features : int
        Features per step of the raw sequences, the time column included.
    fill_values : ndarray of shape (n_values,)
        Training mean of each value feature (time column excluded) over observed steps.
        The estimators fit the encoder on all of ``fit``'s ``X``, the sequences that
        ``early_stopping`` holds out included (their labels reach no statistic).
    use_mask : bool
        Append mask channels.
    time_feature : int or None, default=None
        Index of the time column in the raw sequences (non-negative).
    time_scale : float, default=1.0
        Unit of the time channels, in the unit of the time column (1.0 when the
        training sequences had no positive gap).
    scaled : sequence of int, default=()
        Value channels (indices among the ``n_values`` value channels) read per
        sequence.
    scale_floor : ndarray of shape (n_scaled,), optional
        The smallest standard deviation a sequence's scaled channel is divided by.
    level_stats, log_scale_stats : ndarray of shape (2, n_scaled), optional
        Mean and standard deviation over the training sequences of each scaled
        channel's level and log scale, which standardize those channels.

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

    A channel read per sequence: two series of the same shape, one a thousand times
    the other, become the same values, and their levels and scales two more channels:

    >>> small = np.array([[0.001], [0.002], [0.003]])
    >>> encoder = InputEncoder.fit([small, 1000 * small], scaled=[0])
    >>> encoder.n_scaled, encoder.n_inputs
    (1, 3)
    >>> np.round(encoder.encode_arrays([small, 1000 * small])[1], 2)
    array([[-1.22,  1.  ,  1.  ],
           [ 0.  ,  1.  ,  1.  ],
           [ 1.22,  1.  ,  1.  ]])
    """

    def __init__(
        self,
        n_features: int,
        fill_values: np.ndarray,
        use_mask: bool,
        time_feature: int | None = None,
        time_scale: float = 1.0,
        scaled: tuple[int, ...] | list[int] = (),
        scale_floor: np.ndarray | None = None,
        level_stats: np.ndarray | None = None,
        log_scale_stats: np.ndarray | None = None,
    ) -> None:
        scaled = _channel_indices(scaled)  # once: an iterator is read here
        _check_encoder_fields(n_features, fill_values, time_feature, time_scale, scaled,
                              scale_floor, level_stats, log_scale_stats)
        self.n_features = n_features
        self.fill_values = fill_values
        self.use_mask = use_mask
        self.time_feature = time_feature
        self.time_scale = time_scale
        self.scaled = scaled
        empty = np.zeros((2, 0))
        self.scale_floor = np.zeros(0) if scale_floor is None else np.asarray(scale_floor, dtype=np.float64)
        self.level_stats = empty if level_stats is None else np.asarray(level_stats, dtype=np.float64)
        self.log_scale_stats = empty if log_scale_stats is None else np.asarray(log_scale_stats, dtype=np.float64)

    @classmethod
    def fit(
        cls,
        sequences: list[np.ndarray],
        *,
        time_feature: int | None = None,
        scaled: tuple[int, ...] | list[int] = (),
    ) -> InputEncoder:
        """Learn fill values, whether masks are needed, the time scale and the
        statistics of the channels read per sequence.

        Parameters
        ----------
        sequences : list of ndarray of shape (T_i, d)
            Canonical training sequences.
        time_feature : int or None, default=None
            Index of the column holding each step's time stamp (negative indices count
            from the end); None when the sequences have no time column.
        scaled : sequence of int, default=()
            Value channels to read per sequence (indices among the value channels,
            the time column excluded), such as :meth:`nearly_flat_channels` finds.

        Returns
        -------
        InputEncoder

        Raises
        ------
        ValueError
            ``time_feature`` out of range, an infinite value, a time that is missing or
            decreases within a sequence (the message names the sequence and step), or a
            ``scaled`` channel out of range.
        """
        check_step_arrays(sequences, where="InputEncoder.fit")
        # In float64: float16's sums overflowed (a channel at 1000 had an infinite fill value).
        sequences = [np.asarray(sequence, dtype=np.float64) for sequence in sequences]
        _check_no_infinity(sequences, "InputEncoder.fit")
        n_features = sequences[0].shape[1]
        time_feature = _column_index(time_feature, n_features, "InputEncoder.fit")
        time_scale = 1.0
        if time_feature is not None:
            steps, lengths, _ = joined_steps(sequences)
            times = steps[:, time_feature]
            check_times(sequences, time_feature, joined=(times, lengths))
            gaps = step_gaps(times, lengths)
            # Not the zeros of first steps, nor gaps within the rounding of their times
            # (several labs of one visit whose times were computed two ways): one time.
            positive = gaps[~same_time(times, gaps, lengths)]
            # No positive gap (single steps, or repeated times): any scale gives 0 gaps.
            time_scale = float(np.median(positive)) if positive.size else 1.0
            if not positive.size:
                _warn_of_no_time_scale(time_feature)
            else:
                _warn_of_rounding_gaps(time_scale, times, lengths, time_feature)
        steps = _values(np.concatenate(sequences, axis=0), time_feature)  # (N, n_values)
        encoder = cls(n_features, np.zeros(steps.shape[1]), False, time_feature, time_scale, scaled)
        scaled = encoder.scaled  # checked by the constructor
        _warn_of_float32_underflow(steps, time_feature, scaled)
        if scaled:
            lengths = np.array([len(sequence) for sequence in sequences])
            pooled = _nanstd(steps[:, scaled])  # NaN, read as 1, for a channel never observed
            counts = (~np.isnan(steps[:, scaled])).sum(axis=0)
            with np.errstate(over="ignore"):
                center = np.abs(_over_observed(np.nanmean, steps[:, scaled]))
            if np.isinf(center).any():  # a sum past float64's range: of the values scaled by their largest
                size = _size(steps[:, scaled])
                center = np.abs(_over_observed(np.nanmean, steps[:, scaled] / size)) * size
            # A channel constant up to rounding (scikit-learn's bound) has no spread.
            spread_of_its_own = pooled > counts * np.finfo(np.float64).eps * center
            unit = np.where(spread_of_its_own, pooled, 1.0)  # (n_scaled,) the channel's pooled spread
            level, spread = _sequence_moments(steps[:, scaled], lengths, unit)  # (n, n_scaled) each
            encoder.scale_floor = 1e-8 * unit
            # Levels that differ only by rounding (sequences that all have one mean, such
            # as full periods of a sine; float32 data standardized per series) have a
            # spread of 1e-17 to 1e-8 that would blow an offset at prediction up by as
            # much: read it as the channel's own unit. Log scales are unit-free, and one
            # is an e-fold.
            encoder.level_stats = _center_and_spread(level, unit)
            encoder.log_scale_stats = _center_and_spread(_log_scale(spread, encoder.scale_floor),
                                                         np.ones(len(scaled)))
            steps = encoder._per_sequence(steps, lengths)[0]  # fill values of the scaled values
        observed = ~np.isnan(steps)
        counts = observed.sum(axis=0)
        sums = np.where(observed, steps, 0.0).sum(axis=0)
        encoder.fill_values = np.divide(sums, counts, out=np.zeros(steps.shape[1]), where=counts > 0)
        encoder.use_mask = bool((~observed).any())
        return encoder

    @staticmethod
    def nearly_flat_channels(
        sequences: list[np.ndarray], *, time_feature: int | None = None, ratio: float = 0.1
    ) -> tuple[int, ...]:
        """The value channels that most sequences hold nearly flat at the shared scale.

        A channel is nearly flat when the median over the sequences of its standard
        deviation within a sequence is below ``ratio`` times its
        standard deviation over all steps: the sequences differ in amplitude by
        orders of magnitude, and most of them reach a network as almost constant
        lines at any scale that all sequences share. Such channels are the ones to
        read per sequence (``scaled`` of :meth:`fit`). A channel constant within
        most sequences (a per-sequence covariate: a median below ``1e-8`` times the
        spread, rounding errors) is not one of them.

        Parameters
        ----------
        sequences : list of ndarray of shape (T_i, n_features)
            Canonical training sequences.
        time_feature : int or None, default=None
            Index of the time column, which is never a value channel.
        ratio : float, default=0.1

        Returns
        -------
        tuple of int
            Indices among the value channels.

        Examples
        --------
        >>> import numpy as np
        >>> from sklearn_rnn.sequences import InputEncoder
        >>> rng = np.random.default_rng(0)
        >>> amplitudes = 10.0 ** rng.uniform(-4, 1, size=40)
        >>> X = [np.column_stack([a * rng.normal(size=30), rng.normal(size=30)]) for a in amplitudes]
        >>> InputEncoder.nearly_flat_channels(X)
        (0,)
        """
        check_step_arrays(sequences, where="InputEncoder.nearly_flat_channels")
        sequences = [np.asarray(sequence, dtype=np.float64) for sequence in sequences]
        time_feature = _column_index(time_feature, sequences[0].shape[1], "InputEncoder.nearly_flat_channels")
        steps = _values(np.concatenate(sequences, axis=0), time_feature)
        lengths = np.array([len(sequence) for sequence in sequences])
        with np.errstate(invalid="ignore"):
            typical = _over_observed(np.nanmedian, _sequence_moments(steps, lengths)[1])
            pooled = _over_observed(np.nanstd, steps)
        flat = (typical > 1e-8 * pooled) & (typical < ratio * pooled)  # not rounding errors
        return tuple(int(channel) for channel in np.flatnonzero(flat))

    @property
    def n_values(self) -> int:
        """Value channels: the features other than the time column."""
        return self.n_features - (self.time_feature is not None)

    @property
    def n_masked(self) -> int:
        """Mask channels, one per value channel when masks are used (else 0)."""
        return self.n_values if self.use_mask else 0

    @property
    def n_scaled(self) -> int:
        """Value channels read per sequence (each adds a level and a log-scale channel)."""
        return len(self.scaled)

    @property
    def gap_channel(self) -> int | None:
        """Index of the gap channel in the encoded steps (elapsed time follows it)."""
        return None if self.time_feature is None else self.n_values + self.n_masked + 2 * self.n_scaled

    @property
    def n_inputs(self) -> int:
        """Channels the network reads per step."""
        return self.n_values + self.n_masked + 2 * self.n_scaled + (0 if self.time_feature is None else 2)

    def encode_arrays(self, sequences: list[np.ndarray]) -> list[np.ndarray]:
        """Encode into a list of ``(T_i, n_inputs)`` arrays.

        Parameters
        ----------
        sequences : list of ndarray of shape (T_i, n_features)

        Returns
        -------
        list of ndarray of shape (T_i, n_inputs)
        """
        raw, lengths, shared = self._joined(sequences, "InputEncoder.encode_arrays")
        steps = self._encode_steps(sequences, raw, lengths)
        if shared and steps is raw:  # the sequences' own memory: a copy to edit, as encode gives
            steps = steps.copy()
        return np.split(steps, np.cumsum(lengths)[:-1])

    def encode(
        self,
        sequences: list[np.ndarray],
        *,
        dtype: torch.dtype = torch.float32,
        device: torch.device | str = "cpu",
        warn_missing: bool = True,
    ) -> FlatSequences:
        """Encode into :class:`FlatSequences` on ``device``.

        Parameters
        ----------
        sequences : list of ndarray of shape (T_i, n_features)
        dtype : torch.dtype, default=torch.float32
        device : torch.device or str, default='cpu'
        warn_missing : bool, default=True
            Warn when ``sequences`` hold missing values but the encoder has no mask
            channels. False for a caller that encodes its data in parts and has warned
            once for all of them (:meth:`warn_of_missing`).

        Returns
        -------
        FlatSequences
        """
        raw, lengths, shared = self._joined(sequences, "InputEncoder.encode")
        steps = self._encode_steps(sequences, raw, lengths, warn_missing=warn_missing)
        values = torch.as_tensor(steps, dtype=dtype, device=device)
        if shared and steps is raw and values.device.type == "cpu" and values.dtype == torch.float64:
            values = values.clone()  # not the sequences' own memory
        return FlatSequences(values, torch.as_tensor(lengths, device=device))

    def _joined(self, sequences: list[np.ndarray], where: str) -> tuple[np.ndarray, np.ndarray, bool]:
        """:func:`joined_steps` of ``sequences`` (checked sequences are not joined again),
        refused unless they are a list of ``(T_i, n_features)`` arrays of at least one
        step: checked on the joined steps, each sequence only when that fails."""
        try:
            raw, lengths, shared = joined_steps(sequences)
        except (ValueError, IndexError, TypeError):
            check_step_arrays(sequences, where=where, n_features=self.n_features)
            raise
        if raw.ndim != 2 or raw.shape[1] != self.n_features or not len(lengths) or lengths.min() < 1 \
                or raw.dtype.kind not in "biuf":
            check_step_arrays(sequences, where=where, n_features=self.n_features)
        if raw.dtype.kind == "f" and np.isinf(raw).any():  # as fit refuses them
            _check_no_infinity(sequences, where)
        return raw, lengths, shared

    def warn_of_missing(self, sequences: list[np.ndarray]) -> None:
        """Warn, once for all ``sequences``, that they hold missing values which the
        encoder fills without mask channels (what :meth:`encode` warns of each time).

        Parameters
        ----------
        sequences : list of ndarray of shape (T_i, n_features)
        """
        if not self.use_mask and any(np.isnan(_values(sequence, self.time_feature)).any() for sequence in sequences):
            _warn_of_unmasked_missing(stacklevel=2)

    def _encode_steps(
        self, sequences: list[np.ndarray], raw: np.ndarray, lengths: np.ndarray, *, warn_missing: bool = True
    ) -> np.ndarray:
        """Encode ``raw``, the ``(N, n_features)`` steps of ``sequences`` joined."""
        values = _values(raw, self.time_feature)  # (N, n_values)
        statistics = None
        if self.scaled:
            values, statistics = self._per_sequence(values, lengths)
        values = self._fill(values, lengths, warn_missing=warn_missing)  # (N, n_values [+ masks])
        if statistics is not None:
            values = np.hstack([values, np.repeat(statistics, lengths, axis=0)])
        if self.time_feature is None:
            return values
        check_times(sequences, self.time_feature, joined=(raw[:, self.time_feature], lengths))
        return np.hstack([values, self._time_channels(raw[:, self.time_feature], lengths)])

    def _per_sequence(self, values: np.ndarray, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``values`` with the scaled channels read per sequence, and each sequence's
        standardized levels and log scales, ``(n, 2 * n_scaled)`` (0, the training
        mean, where a sequence has no observed value of a channel, and for the log scale
        where it has no spread: a flat or one-step sequence)."""
        columns = list(self.scaled)
        if self.scale_floor.shape != (len(columns),) or self.level_stats.shape != (2, len(columns)) \
                or self.log_scale_stats.shape != (2, len(columns)):
            raise ValueError(
                f"this InputEncoder reads channels {columns} per sequence but lacks their "
                "scale_floor, level_stats and log_scale_stats: expected each given with "
                "scaled. Learn them with InputEncoder.fit(sequences, scaled=...), or pass all "
                "three to the constructor."
            )
        level, spread = _sequence_moments(values[:, columns], lengths, self.scale_floor / 1e-8)
        scale = np.maximum(spread, self.scale_floor)
        values = values.astype(np.float64)  # a copy: the caller's steps stay as they are (ints too)
        deviations = values[:, columns] - np.repeat(level, lengths, axis=0)
        # A sequence constant up to rounding (no spread) is flat: its rounding is no shape.
        deviations[(np.repeat(spread, lengths, axis=0) == 0) & ~np.isnan(deviations)] = 0.0
        values[:, columns] = deviations / np.repeat(scale, lengths, axis=0)  # NaN stays NaN
        log_scale = _log_scale(spread, self.scale_floor)
        statistics = np.hstack([
            (level - self.level_stats[0]) / self.level_stats[1],
            (log_scale - self.log_scale_stats[0]) / self.log_scale_stats[1],
        ])
        return values, np.nan_to_num(statistics, nan=0.0)

    def _fill(self, steps: np.ndarray, lengths: np.ndarray, *, warn_missing: bool = True) -> np.ndarray:
        observed = ~np.isnan(steps)  # (N, n_values)
        if observed.all():
            return steps if not self.use_mask else np.hstack([steps, observed.astype(float)])
        if not self.use_mask and warn_missing:
            _warn_of_unmasked_missing(stacklevel=2)
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
        times = np.asarray(times, dtype=np.float64)
        starts = np.cumsum(lengths) - lengths  # (n,) first row of each sequence
        elapsed = times - np.repeat(times[starts], lengths)  # (N,)
        return np.column_stack([step_gaps(times, lengths), elapsed]) / self.time_scale  # (N, 2)


def _channel_indices(scaled: Any) -> tuple[int, ...]:
    """``scaled`` as a tuple of channel indices, read once (a generator was used up by a
    check and left none); refused unless every entry is an integer (int() truncated 1.9
    to channel 1 and read '1' as channel 1; an int met "not iterable")."""
    given = scaled
    if hasattr(scaled, "tolist") and not isinstance(scaled, (str, bytes)):
        scaled = scaled.tolist()  # a numpy array or a torch tensor of indices
    if isinstance(scaled, int) or isinstance(scaled, (str, bytes)) or not hasattr(scaled, "__iter__"):
        scaled = None
    else:
        scaled = tuple(scaled)
    if scaled is None or not all(isinstance(c, Integral) and not isinstance(c, bool) for c in scaled):
        raise ValueError(
            f"scaled must be a sequence of value-channel indices (ints), e.g. [0]; got {given!r}."
        )
    return tuple(int(channel) for channel in scaled)


def _check_encoder_fields(
    n_features: Any, fill_values: Any, time_feature: Any, time_scale: Any, scaled: Any,
    scale_floor: Any, level_stats: Any, log_scale_stats: Any,
) -> None:
    """Refuse an :class:`InputEncoder` built by hand with fields that disagree: they
    broke encoding silently (fill values broadcast into extra channels, NaN fill values
    reaching the network, gaps of NaN and inf, levels of 1.8e308 from a spread of 0) or
    with raw numpy errors. The per-sequence fields are checked where given (``fit`` sets
    them after building the encoder; :meth:`InputEncoder._per_sequence` refuses an
    encoder that reads channels per sequence without them)."""
    if isinstance(n_features, bool) or not isinstance(n_features, Integral) or n_features < 1:
        raise ValueError(f"n_features must be an int >= 1; got {n_features!r}.")
    if time_feature is not None and (
        isinstance(time_feature, bool) or not isinstance(time_feature, Integral)
        or not 0 <= time_feature < n_features
    ):
        raise ValueError(f"time_feature must be None or an int in [0, {n_features - 1}]; got {time_feature!r}.")
    n_values = n_features - (time_feature is not None)
    if np.shape(fill_values) != (n_values,):
        raise ValueError(
            f"fill_values must hold one value per value channel ({n_values}: the features other "
            f"than the time column); got shape {np.shape(fill_values)}."
        )
    if not np.isfinite(np.asarray(fill_values, dtype=np.float64)).all():
        raise ValueError(
            f"fill_values must be finite (they stand in for missing values, which the "
            f"network never sees); got {np.asarray(fill_values).tolist()}."
        )
    if not (isinstance(time_scale, Real) and math.isfinite(time_scale) and time_scale > 0):
        raise ValueError(f"time_scale must be a positive, finite number; got {time_scale!r}.")
    channels = list(_channel_indices(scaled))
    if any(not 0 <= channel < n_values for channel in channels) or len(set(channels)) != len(channels):
        raise ValueError(
            f"scaled must name distinct value channels in [0, {n_values - 1}] (the features other "
            f"than the time column); got {channels}."
        )
    if scale_floor is not None and (
        np.shape(scale_floor) != (len(channels),)
        or not (np.isfinite(np.asarray(scale_floor, dtype=np.float64)) & (np.asarray(scale_floor) > 0)).all()
    ):
        raise ValueError(
            f"scale_floor must hold one positive, finite spread per scaled channel "
            f"({len(channels)}); got {np.asarray(scale_floor).tolist()!r}."
        )
    for name, stats in (("level_stats", level_stats), ("log_scale_stats", log_scale_stats)):
        if stats is None:
            continue
        if np.shape(stats) != (2, len(channels)):
            raise ValueError(
                f"{name} must have shape (2, {len(channels)}), a center and a spread per scaled "
                f"channel; got shape {np.shape(stats)}."
            )
        stats = np.asarray(stats, dtype=np.float64)
        if not (np.isfinite(stats).all() and (stats[1] > 0).all()):
            raise ValueError(
                f"{name} must hold finite centers and positive, finite spreads (row 1), one "
                f"per scaled channel; got {stats.tolist()}."
            )


def _log_scale(spread: np.ndarray, floor: np.ndarray) -> np.ndarray:
    """Each sequence's log scale, NaN (read as the typical scale, 0 once standardized)
    where it has no spread: a flat or one-step sequence's log(floor), 18 e-folds below
    the channel's unit, came out at -37 to -105 and drowned its level. (What counts as
    no spread: :func:`_sequence_moments`.)"""
    with np.errstate(divide="ignore"):
        return np.where(spread > 0, np.log(np.maximum(spread, floor)), np.nan)


def _check_no_infinity(sequences: list[np.ndarray], where: str) -> None:
    """Refuse an infinite value, naming it: an infinite time made every gap 'within
    rounding' (time_scale 1, a false warning), an infinite value read as missing."""
    if not np.isinf(joined_steps(sequences)[0]).any():  # the joined steps first, at once
        return
    for index, sequence in enumerate(sequences):  # then the culprit, named
        infinite = np.isinf(np.asarray(sequence, dtype=np.float64))
        if infinite.any():
            step, feature = (int(i) for i in np.argwhere(infinite)[0])
            raise ValueError(
                f"{where}: sequence {index}, step {step}, feature {feature} is infinite: expected "
                "finite values (NaN for a missing one). Replace or drop it first."
            )


def _sequence_moments(
    values: np.ndarray, lengths: np.ndarray, unit: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Each sequence's mean and standard deviation of each channel over its observed
    steps, ``(n, channels)`` each; NaN where a sequence observed none. A sequence
    constant up to rounding (a spread of at most ``count * eps * max(|mean|, unit)``,
    scikit-learn's bound for a constant feature, at the sequence's level or at the
    channel's ``unit``, its pooled spread) has a spread of 0: at a level of 1e9, one
    unit in the last place read as a shape of +-1.4; at level 0, the 1e-16 left by a
    cancellation (a second difference of a uniform motion) read as a log scale 18
    e-folds below the channel's, -4 to -8 standard units, while exact zeros read as
    typical. Squares past float64's range either way (amplitudes above 1e154 or below
    1e-162) are taken of the deviations scaled by their largest."""
    values = np.asarray(values, dtype=np.float64)  # float32's mean of a constant is off by 6e-5
    starts = np.cumsum(lengths) - lengths
    observed = ~np.isnan(values)
    counts = np.add.reduceat(observed, starts, axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.add.reduceat(np.where(observed, values, 0.0), starts, axis=0) / counts
        deviations = np.where(observed, values - np.repeat(mean, lengths, axis=0), 0.0)
        with np.errstate(over="ignore", under="ignore"):
            spread = np.sqrt(np.add.reduceat(deviations**2, starts, axis=0) / counts)
        suspect = np.isinf(spread) | (spread == 0)  # squares over- or underflowed, or a flat sequence
        if suspect.any():  # the largest deviations only then: a pass that cost encoding 14%
            largest = np.maximum.reduceat(np.abs(deviations), starts, axis=0)
            lost = np.isinf(spread) | ((spread == 0) & (largest > 0))
            if lost.any():
                size = np.where(largest > 0, largest, 1.0)
                scaled = deviations / np.repeat(size, lengths, axis=0)
                rescued = size * np.sqrt(np.add.reduceat(scaled**2, starts, axis=0) / counts)
                spread = np.where(lost, rescued, spread)
        level = np.abs(mean) if unit is None else np.maximum(np.abs(mean), unit)
        spread[spread <= counts * np.finfo(np.float64).eps * level] = 0.0
    return mean, spread


def _center_and_spread(statistic: np.ndarray, unit: np.ndarray) -> np.ndarray:
    """``(2, channels)``: the mean and standard deviation over sequences of a per-sequence
    statistic (NaN where a sequence had none skipped). A spread of at most ``1e-6 * unit``
    (of each channel), or within the rounding of the center (16 units in the last place
    of float64: levels of 3e10 that differ only by rounding), is rounding error rather
    than a difference between sequences and is read as ``unit``."""
    center = np.nan_to_num(_over_observed(np.nanmean, statistic))  # 0 for a channel never observed
    spread = _nanstd(statistic)
    rounding = np.maximum(1e-6 * unit, 16 * np.finfo(np.float64).eps * np.abs(center))
    return np.vstack([center, np.where(np.isfinite(spread) & (spread > rounding), spread, unit)])


def _size(values: np.ndarray) -> np.ndarray:
    """Each column's largest magnitude over its observed values, 1 where none is
    positive and finite: the divisor that keeps the squares of a spread in range."""
    largest = _over_observed(np.nanmax, np.abs(values))
    return np.where(np.isfinite(largest) & (largest > 0), largest, 1.0)


def _nanstd(values: np.ndarray) -> np.ndarray:
    """``np.nanstd`` of each column over its observed values (NaN for a column with
    none), whose squares stay in float64's range: of the values scaled by their
    largest where the plain one over- or underflows (amplitudes above 1e154 gave an
    infinite spread, a scale floor of inf and every sequence encoded as zeros)."""
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        spread = _over_observed(np.nanstd, values)
        varied = _over_observed(np.nanmax, values) > _over_observed(np.nanmin, values)
    lost = np.isinf(spread) | ((spread == 0) & varied)
    if lost.any():
        size = _size(values)
        spread = np.where(lost, size * _over_observed(np.nanstd, values / size), spread)
    return spread


def _over_observed(reduce: Callable[..., np.ndarray], values: np.ndarray) -> np.ndarray:
    """``reduce(values, axis=0)`` over the columns holding a value, NaN for the others.

    NumPy warns of an all-NaN column; catching that with :func:`warnings.catch_warnings`
    changes process-wide state, which fits in threads undid for one another, leaving an
    "ignore RuntimeWarning" filter behind for the whole process.
    """
    observed = ~np.isnan(values).all(axis=0)
    result = np.full(values.shape[1:], np.nan)
    if observed.any():
        result[observed] = reduce(values[:, observed], axis=0)
    return result


def _values(steps: np.ndarray, time_feature: int | None) -> np.ndarray:
    """The columns of ``steps`` other than the time column."""
    return steps if time_feature is None else np.delete(steps, time_feature, axis=1)


class _ColumnIndex(Interval):
    """Any int but a bool, as a column's index: ``time_feature=False`` would read as
    column 0, the opposite of what it says."""

    def __init__(self) -> None:
        super().__init__(Integral, None, None, closed="neither")

    def is_satisfied_by(self, val: Any) -> bool:
        return not isinstance(val, (bool, np.bool_)) and super().is_satisfied_by(val)

    def __str__(self) -> str:
        return "an int (a column's index, not a bool)"


#: The parameter constraints of ``time_feature``, wherever it is a parameter (the
#: estimators, :class:`SequenceStandardScaler`, ``VisitFeatures``).
TIME_FEATURE_CONSTRAINTS = [_ColumnIndex(), str, None]


def _resolve_time_feature(
    time_feature: int | str | None, n_features: int, names: Any = None, *, table: bool = False,
    fitting: bool = False,
) -> int | None:
    """The index of the time column: ``time_feature`` itself (negative counts from the
    end), or the position of the column it names among ``names``, the step features'
    names of the sequences (DataFrames' columns), None where they have none (``table``:
    because X was a 2D table, whose columns are steps)."""
    if time_feature is None:
        return None
    if isinstance(time_feature, (bool, np.bool_)):
        raise TypeError(
            f"time_feature must be an int (a column's index), a column name or None; got "
            f"{time_feature!r}, which would read as column {int(time_feature)}. Pass None "
            "for sequences without a time column."
        )
    if isinstance(time_feature, str):
        if names is None and table:
            raise ValueError(
                f"time_feature={time_feature!r} names a column, but X is a 2D table, read as "
                "one univariate sequence per row: its columns are steps, not features of a "
                "step, so none of them can hold the steps' times. Pass sequences of several "
                "features per step, one of them the time, as DataFrames (a list of frames, "
                "a panel, or from_long_format(..., as_frame=True))."
            )
        if names is None:
            raise ValueError(
                f"time_feature={time_feature!r} names a column, but X came without column "
                "names: expected the sequences in pandas DataFrames whose columns include it "
                "(a list of frames, a panel, or a sequence column of frames). Pass the "
                "column's index instead (time_feature=0 for the first column); in a pipeline, "
                "a step before the estimator that returns arrays drops the names "
                "(SequenceStandardScaler keeps them)."
            )
        matches = np.flatnonzero(np.asarray(names, dtype=object) == time_feature)
        if matches.size == 0:
            level = (
                " If it names a panel's time level, which is not a column, add it as a column "
                f"of numbers: X.assign({time_feature}=t) with t = X.index.get_level_values(-1), "
                "or, for dates, days since the first: t = (t - t.min()) / pd.Timedelta(days=1). "
                "If it names the index of a list of frames: [frame.reset_index() for frame in X] "
                "(dates again as numbers)."
                if isinstance(time_feature, str) and time_feature.isidentifier() else ""
            )
            raise ValueError(
                f"time_feature={time_feature!r} is not a column of X: expected one of "
                f"{list(names)}. Pass the name of the column that holds each step's time "
                f"stamp, or its position (an int).{level}"
            )
        return int(matches[0])
    if table and fitting:  # a model fitted so before this was refused still loads and predicts
        raise ValueError(
            f"time_feature={time_feature!r} asks for a time column, but X is a 2D table, read "
            "as one univariate sequence per row: its only feature per step would be the time, "
            "and its values would become time stamps. Pass sequences of several features per "
            "step, one of them the time (a 3D array (n, T, d), a list of (T_i, d) arrays or of "
            "DataFrames), or time_feature=None for a table of values. (For sequences of event "
            "times alone, pass them as a 3D array: X[:, :, None].)"
        )
    if not isinstance(time_feature, Integral):
        raise TypeError(
            f"time_feature must be an int (a column's index), a column name or None; got "
            f"{time_feature!r} of type {type(time_feature).__name__}. Pass the index of the "
            "column that holds each step's time stamp, as an int."
        )
    if not -n_features <= time_feature < n_features:
        raise ValueError(
            f"time_feature={time_feature} is out of range: X has {n_features} features per "
            f"step, so expected an index in [{-n_features}, {n_features - 1}]. Pass the "
            "index of the column that holds each step's time stamp, or None."
        )
    return int(time_feature) % n_features


def _column_index(time_feature: int | None, n_features: int, where: str) -> int | None:
    """:func:`_resolve_time_feature` for the tools that read arrays, which carry no column
    names: a name is refused as such (not as X "without column names")."""
    if isinstance(time_feature, str):
        raise TypeError(
            f"{where} takes the time column's index (an int, negative counting from the end) "
            f"or None; got the name {time_feature!r}. It reads arrays, which carry no column "
            f"names: pass the column's position, list(frame.columns).index({time_feature!r})."
        )
    return _resolve_time_feature(time_feature, n_features)


def _warn_of_unmasked_missing(stacklevel: int) -> None:
    """Missing values met by an encoder without mask channels: they are filled unmarked
    (``stacklevel`` as for :func:`warnings.warn` called where this is called, at least
    up to the first frame outside the package: the user's line)."""
    warnings.warn(
        "X holds missing values (NaN), but the training data had none, so the model "
        "has no mask channels: they are filled (the last observed value of the "
        "feature, else its training mean) and the network cannot tell them from "
        "measured values. For masks, fit on training data with missing values (a "
        "stream of partial_fit calls decides on its first batch).",
        UserWarning,
        stacklevel=max(stacklevel + 1, outside_stacklevel()),
    )


def _warn_of_float32_underflow(values: np.ndarray, time_feature: int | None, scaled: tuple[int, ...]) -> None:
    """Warn of value channels (not read per sequence, which standardizes them in float64)
    holding nonzero values below float32's smallest normal number: :meth:`InputEncoder.encode`
    gives float32 by default, the type the network trains in, where they lose their
    digits or become 0 (a feature of about 1e-50 trained as all zeros, without a word)."""
    tiny = np.finfo(np.float32).tiny
    with np.errstate(invalid="ignore"):
        magnitudes = np.abs(values)
        small = (magnitudes > 0) & (magnitudes < tiny)  # NaN compares False
    small[:, list(scaled)] = False
    channels = np.flatnonzero(small.any(axis=0))
    if not channels.size:
        return
    features = [int(c) + (time_feature is not None and c >= time_feature) for c in channels]
    smallest = float(np.min(magnitudes[:, channels][small[:, channels]]))
    warnings.warn(
        (f"features {features} of the training data hold" if len(features) > 1
         else f"feature {features[0]} of the training data holds") + " nonzero "
        f"values below float32's smallest normal number ({tiny:.3g}; the smallest here "
        f"{smallest:.3g}): the network trains in float32, where they lose their digits or "
        "become 0. Rescale them first (multiply by a power of ten, or take their logarithm).",
        UserWarning,
        stacklevel=max(3, outside_stacklevel()),  # InputEncoder.fit's caller, or the estimator's
    )


def _warn_of_rounding_gaps(time_scale: float, times: np.ndarray, lengths: np.ndarray, time_feature: int) -> None:
    """Warn where the typical gap is rounding noise next to the sequences' spans: times
    equal up to the rounding of an earlier origin (days since 1970, then shifted to days
    since each first visit) keep their differences, which no bound relative to the
    shifted times catches, and became the time scale (3.6e-12 days: a month read as 7e12)."""
    ends = np.cumsum(lengths) - 1
    spans = times[ends] - times[ends - lengths + 1]
    spans = spans[spans > 0]
    if not spans.size:
        return
    span = float(np.median(spans))
    if time_scale >= 1e4 * np.finfo(np.float64).eps * span:
        return
    warnings.warn(
        f"The time column (feature {time_feature}) has a typical gap (time_scale={time_scale:.3g}) "
        f"{span / time_scale:.1e} times smaller than a sequence's typical span ({span:.3g}): such "
        "gaps are rounding noise, as between times that were equal at an earlier origin (days "
        "since 1970) and kept their differences when shifted (days since each first visit). "
        "Every real gap would then read as a huge one. Round the times before fitting (e.g. "
        "np.round(t, 6)), or shift them after rounding.",
        UserWarning,
        stacklevel=max(3, outside_stacklevel()),  # InputEncoder.fit's caller, or the estimator's
    )


def _warn_of_no_time_scale(time_feature: int) -> None:
    """Warn that the time scale is 1 for want of a positive gap to learn it from: the
    gaps met after fit are then read in the time column's own unit."""
    warnings.warn(
        f"The time column (feature {time_feature}) has no positive gap between consecutive "
        "steps of the training sequences (each is one step long, or its times repeat), so "
        "no time scale can be learned and time_scale is 1: gaps met later (in a later "
        "partial_fit call, a warm_start fit, or at prediction) reach the network unscaled, "
        "in the time column's own unit, and that unit then changes the model (days and "
        "years no longer give the same predictions). Make the first training call hold "
        "sequences of two or more steps at different times: the encoding is fixed by it.",
        UserWarning,
        stacklevel=max(3, outside_stacklevel()),  # InputEncoder.fit's caller, or the estimator's
    )


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
        rest = np.asarray(sequences[index])[step:]
        if times[row] == 0 and not np.any(rest):  # every feature 0 from here to the end
            raise ValueError(
                f"sequence {index} of X has times that decrease at step {step} (0 after "
                f"{number_text(times[row - 1])}) in column time_feature={time_feature}, and "
                f"its steps from {step} on are all zeros: zero padding, read as visits at "
                "time 0 (sorting would move them to the front). Pad with NaN instead "
                "(trailing steps that are all NaN end a sequence of a 3D array), or pass a "
                "list of arrays of their own lengths."
            )
        rounding = bool(within_rounding(times[row - 1] - times[row], max(abs(times[row - 1]), abs(times[row]))))
        raise ValueError(
            f"sequence {index} of X has times that decrease at step {step} "
            f"({number_text(times[row])} after {number_text(times[row - 1])}) in column "
            f"time_feature={time_feature}: expected non-decreasing times within each "
            "sequence. Sort each sequence's steps by time"
            + (" (these two differ only by rounding, one time computed two ways: sorting "
               "keeps them as one time)" if rounding else "")
            + ". (These are the values the estimator received: a scaler before it in a "
            "pipeline changes them, not their order.)"
        )


def same_time(times: np.ndarray, gaps: np.ndarray, lengths: np.ndarray | None = None) -> np.ndarray:
    """Whether each step is at the time of the step before, up to rounding: its gap (from
    :func:`step_gaps`) is 0, or at most 8 units in the last place of the largest time of
    its sequence (times equal but computed two ways, 0.1 + 0.2 and 0.3; the rounding of
    a computed time follows the magnitude of the times it was computed from, so a time
    near 0 is held to the same bound). True at first steps.

    Parameters
    ----------
    times : ndarray of shape (N,)
    gaps : ndarray of shape (N,)
    lengths : ndarray of int of shape (n,), optional
        Each sequence's steps, the sequences joined in order in ``times``: one far time
        (a sentinel) then bounds its own sequence's gaps only. None: all one sequence.

    Returns
    -------
    ndarray of bool of shape (N,)

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_rnn.sequences._encoding import same_time, step_gaps
    >>> times = np.array([0.3, 0.1 + 0.2, 1.0])
    >>> same_time(times, step_gaps(times, np.array([3]))).tolist()
    [True, True, False]
    """
    times = np.asarray(times, dtype=np.float64)
    lengths = np.array([len(times)]) if lengths is None else np.asarray(lengths)
    largest = np.maximum.reduceat(np.abs(times), np.cumsum(lengths) - lengths) if len(times) else np.zeros(0)
    return within_rounding(gaps, np.repeat(largest, lengths))


def within_rounding(difference: Any, magnitude: Any) -> Any:
    """Whether ``difference`` is at most 8 units in the last place of ``magnitude``: two
    numbers of that magnitude equal but computed two ways (0.1 + 0.2 and 0.3).

    Examples
    --------
    >>> from sklearn_rnn.sequences._encoding import within_rounding
    >>> bool(within_rounding(0.1 + 0.2 - 0.3, 0.3)), bool(within_rounding(1e-9, 0.3))
    (True, False)
    """
    return difference <= 8 * np.finfo(np.float64).eps * magnitude


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
    times = np.asarray(times, dtype=np.float64)  # unsigned times would wrap around
    gaps = np.diff(times, prepend=times[:1])
    gaps[np.cumsum(lengths) - lengths] = 0.0  # no previous step in the same sequence
    return gaps
