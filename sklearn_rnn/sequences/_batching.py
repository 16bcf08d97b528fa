"""Variable-length batches: sequences stored flat, gathered into length-bucketed batches."""

from __future__ import annotations

from collections.abc import Iterator
from numbers import Integral, Real
from typing import Any

import numpy as np
import torch

from ._validation import check_step_arrays

__all__ = [
    "FlatSequences",
    "SequenceDataset",
    "BucketBatchLoader",
    "balanced_batches",
    "bucket_batches",
]

#: Batches per sorting pool when shuffling: enough to find similar lengths, few
#: enough that batches still mix samples from across the data set.
POOL_BATCHES = 50


def _check_count(value: Any, name: str, meaning: str, *, minimum: int = 1) -> None:
    """Refuse ``value`` of the parameter ``name`` (``meaning``: what it counts) unless it
    is an int, not a bool, of at least ``minimum``: a batch size of 0 would fail deep
    inside, a negative one would silently give no batches."""
    if isinstance(value, Integral) and not isinstance(value, (bool, np.bool_)) and value >= minimum:
        return
    raise ValueError(
        f"{name} must be an int of at least {minimum} ({meaning}); got {value!r} of type "
        f"{type(value).__name__}. Pass a whole number of {meaning}, such as {name}=8."
    )


def _check_generator(rng: Any, name: str, where: str) -> None:
    """Refuse ``rng`` (the parameter ``name`` of ``where``) unless it is a numpy
    ``Generator`` (or a legacy ``RandomState``, which draws the same way): a seed of 0
    failed at the first draw with "'int' object has no attribute 'permutation'"."""
    if isinstance(rng, (np.random.Generator, np.random.RandomState)):
        return
    seed = f"numpy.random.default_rng({rng!r})" if isinstance(rng, Integral) else "numpy.random.default_rng(0)"
    raise ValueError(
        f"{where} draws from {name}, which must be a numpy.random.Generator; got {rng!r} of type "
        f"{type(rng).__name__}. Pass {name}={seed}, created once and kept: it advances with "
        "every draw, so each pass gets new batches."
    )


class FlatSequences:
    """Sequences stored back to back in one tensor, gathered into padded batches.

    Storing the steps flat keeps memory proportional to the total number of steps, and
    a batch is assembled with one gather on the tensor's device (no host round trip
    when the data lives on a GPU).

    Parameters
    ----------
    values : torch.Tensor of shape (total_steps, n_features)
        Every sequence's steps, concatenated.
    lengths : torch.Tensor of shape (n_sequences,)
        Steps of each sequence, at least 1.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_rnn.sequences import FlatSequences
    >>> flat = FlatSequences.from_arrays([np.ones((3, 1)), 2 * np.ones((1, 1))])
    >>> x, lengths = flat.batch(np.array([0, 1]))
    >>> x[..., 0]
    tensor([[1., 1., 1.],
            [2., 0., 0.]])
    >>> lengths
    tensor([3, 1])
    """

    def __init__(self, values: torch.Tensor, lengths: torch.Tensor) -> None:
        _check_flat(values, lengths)
        self.values = values
        self.lengths = lengths.to(device=values.device, dtype=torch.long)
        self._starts: torch.Tensor | None = None
        self._common_length: int | None = None
        self._common_length_known = False

    @property
    def starts(self) -> torch.Tensor:
        """The first row of each sequence in ``values``, ``(n,)`` (found once, when
        first needed: a batch of equal lengths does not need it)."""
        if self._starts is None:
            self._starts = torch.cumsum(self.lengths, 0) - self.lengths
        return self._starts

    @classmethod
    def from_arrays(
        cls,
        arrays: list[np.ndarray],
        *,
        dtype: torch.dtype = torch.float32,
        device: torch.device | str = "cpu",
    ) -> FlatSequences:
        """Build from a list of ``(T_i, d)`` arrays.

        Parameters
        ----------
        arrays : list of ndarray of shape (T_i, d)
            The sequences, each at least one step long; they must hold no NaN (encode
            missing values first).
        dtype : torch.dtype, default=torch.float32
            Storage type.
        device : torch.device or str, default='cpu'
            Where the steps live.

        Returns
        -------
        FlatSequences
        """
        check_step_arrays(arrays, where="FlatSequences.from_arrays")
        steps = np.concatenate(arrays, axis=0)
        if steps.dtype.kind in "fc" and np.isnan(steps).any():  # NaN reached the batches unnamed
            sequence = next(k for k, array in enumerate(arrays) if np.isnan(np.asarray(array)).any())
            raise ValueError(
                f"FlatSequences.from_arrays takes sequences without NaN; sequence {sequence} holds "
                "NaN. Encode missing values first: InputEncoder.fit(arrays).encode(arrays) fills "
                "them, adds a mask channel and gives the FlatSequences."
            )
        values = torch.as_tensor(steps, dtype=dtype, device=device)
        lengths = torch.as_tensor([len(array) for array in arrays], device=device)
        return cls(values, lengths)

    def __len__(self) -> int:
        return int(self.lengths.shape[0])

    def subset(self, indices: np.ndarray | torch.Tensor) -> FlatSequences:
        """The sequences at ``indices``, in that order, stored anew.

        Parameters
        ----------
        indices : array-like of int of shape (m,)

        Returns
        -------
        FlatSequences
        """
        index = _positions(indices, self.values.device)
        lengths = self.lengths[index]  # (m,)
        new_starts = torch.cumsum(lengths, 0) - lengths  # (m,)
        within = torch.arange(int(lengths.sum()), device=index.device) - torch.repeat_interleave(
            new_starts, lengths
        )  # position of each selected step inside its sequence
        rows = torch.repeat_interleave(self.starts[index], lengths) + within
        return FlatSequences(self.values[rows], lengths)

    @property
    def common_length(self) -> int | None:
        """The length every sequence has, or None when the lengths differ (found once;
        None too when ``values`` holds rows beyond the sequences' steps)."""
        if not self._common_length_known:
            lengths = self.lengths.cpu().numpy()
            if len(lengths) and lengths.min() == lengths.max():
                common = int(lengths[0])
                self._common_length = common if len(self.values) == common * len(lengths) else None
            self._common_length_known = True
        return self._common_length

    def batch(self, indices: np.ndarray | torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Gather sequences into a right-padded batch.

        When every sequence has the same length (a stream of fixed windows), the steps
        are an ``(n, T, d)`` block and the batch is one gather from it, with no padding.

        Parameters
        ----------
        indices : array-like of int of shape (batch,)
            Which sequences.

        Returns
        -------
        x : torch.Tensor of shape (batch, max_length, n_features)
            Zero after each sequence's end.
        lengths : torch.Tensor of shape (batch,)
        """
        index = _positions(indices, self.values.device)
        lengths = self.lengths[index]  # (B,)
        if not len(index):  # an empty batch, of no steps
            return self.values.new_zeros((0, 0, self.values.shape[1])), lengths
        common = self.common_length
        if common is not None:
            return self.values.reshape(len(self), common, self.values.shape[1])[index], lengths
        steps = torch.arange(int(lengths.max()), device=index.device)  # (T,)
        valid = steps[None, :] < lengths[:, None]  # (B, T)
        rows = self.starts[index][:, None] + torch.minimum(steps[None, :], lengths[:, None] - 1)
        # Zeros where padded: not the last row times 0, which is NaN for an infinite value;
        # in the values' own dtype (a Python 0.0 made int64 labels float32, rounding 2**24 on).
        x = torch.where(valid[..., None], self.values[rows], self.values.new_zeros(()))  # (B, T, d)
        return x, lengths


def _positions(indices: Any, device: Any) -> torch.Tensor:
    """``indices`` as a 1-D int64 tensor of sequence positions; a boolean mask, float or
    0-d indices are refused by name (a mask was read as the positions 0 and 1, floats
    were truncated), and no indices are an empty selection."""
    index = torch.as_tensor(indices, device=device)
    if index.numel() == 0 and index.ndim == 1:
        return index.to(torch.long)
    if index.dtype == torch.bool or index.is_floating_point() or index.is_complex():
        fix = " For a boolean mask, pass np.flatnonzero(mask)." if index.dtype == torch.bool else ""
        raise ValueError(f"indices must be integer positions of sequences; got dtype {index.dtype}.{fix}")
    if index.ndim != 1:
        raise ValueError(
            f"indices must be one-dimensional, one per sequence of the batch; got shape {tuple(index.shape)}."
        )
    return index.to(torch.long)


class SequenceDataset(torch.utils.data.Dataset):
    """Flat sequences with their targets and sample weights.

    Parameters
    ----------
    sequences : FlatSequences
        The inputs.
    y : torch.Tensor of shape (n,) or (n, k), or FlatSequences, optional
        Targets; None at prediction time. Per-step targets are a
        :class:`FlatSequences` of ``(T_i, k)`` arrays, whose batches are padded
        like the inputs'.
    sample_weight : torch.Tensor of shape (n,), optional
        Weights; ones when None.

    Examples
    --------
    >>> import numpy as np, torch
    >>> from sklearn_rnn.sequences import FlatSequences, SequenceDataset
    >>> data = SequenceDataset(FlatSequences.from_arrays([np.ones((2, 1))]), torch.tensor([1]))
    >>> len(data)
    1
    """

    def __init__(
        self,
        sequences: FlatSequences,
        y: torch.Tensor | FlatSequences | None = None,
        sample_weight: torch.Tensor | None = None,
    ) -> None:
        if not isinstance(sequences, FlatSequences):  # a bare AttributeError came
            raise TypeError(
                f"sequences must be a FlatSequences; got {type(sequences).__name__}. Build it with "
                "FlatSequences.from_arrays(arrays), after InputEncoder.encode for arrays with NaN."
            )
        n = len(sequences)
        if y is not None:
            _check_rows(y, n, "y", "one target (or one row of targets) per sequence")
        if isinstance(y, FlatSequences):
            steps = sequences.lengths.to(y.lengths.device)  # (n,)
            if not torch.equal(y.lengths, steps):
                index = int(torch.nonzero(y.lengths != steps)[0, 0])
                raise ValueError(
                    f"y holds targets at every step, which must follow the steps of the inputs; "
                    f"sequence {index} has {int(steps[index])} steps and its targets "
                    f"{int(y.lengths[index])}. Give each sequence one row of targets per step."
                )
        if sample_weight is None:
            sample_weight = torch.ones(n, device=sequences.values.device)
        else:
            _check_rows(sample_weight, n, "sample_weight", "one weight per sequence")
            if sample_weight.ndim != 1:
                raise ValueError(
                    f"sample_weight must be a tensor of shape ({n},), one weight per sequence; "
                    f"got shape {tuple(sample_weight.shape)}."
                )
        self.sequences = sequences
        self.y = y
        self.sample_weight = sample_weight

    def __len__(self) -> int:
        return len(self.sequences)

    def __getitem__(self, index: int) -> tuple[dict[str, torch.Tensor], torch.Tensor | None]:
        return self.collate(np.array([index]))

    def subset(self, indices: np.ndarray) -> SequenceDataset:
        """The samples at ``indices`` with their targets and weights.

        Parameters
        ----------
        indices : ndarray of int of shape (m,)

        Returns
        -------
        SequenceDataset
        """
        index = _positions(indices, self.sample_weight.device)  # a mask was read as positions 0, 1
        y: torch.Tensor | FlatSequences | None
        if isinstance(self.y, FlatSequences):
            y = self.y.subset(index)
        else:
            y = None if self.y is None else self.y[index.to(self.y.device)]
        return SequenceDataset(self.sequences.subset(index), y, self.sample_weight[index])

    def collate(self, indices: np.ndarray) -> tuple[dict[str, torch.Tensor], torch.Tensor | None]:
        """Assemble the batch of ``indices``: ``({'x', 'lengths', 'sample_weight'}, y)``.

        Parameters
        ----------
        indices : ndarray of int of shape (batch,)

        Returns
        -------
        inputs : dict of torch.Tensor
        y : torch.Tensor or None
        """
        index = _positions(indices, self.sample_weight.device)
        x, lengths = self.sequences.batch(index)
        inputs = {"x": x, "lengths": lengths, "sample_weight": self.sample_weight[index]}
        if isinstance(self.y, FlatSequences):
            y = self.y.batch(indices)[0]  # (B, T, k), zero after each sequence's end
        else:
            y = None if self.y is None else self.y[index.to(self.y.device)]
        return inputs, y


def _check_flat(values: Any, lengths: Any) -> None:
    """Refuse what :class:`FlatSequences` cannot index: anything but a 2-D ``values``
    tensor and a 1-D tensor of integer ``lengths``, each at least 1, summing to at most
    its rows."""
    if not isinstance(values, torch.Tensor) or values.ndim != 2:
        shape = tuple(values.shape) if isinstance(values, torch.Tensor) else type(values).__name__
        raise ValueError(
            f"values must be a (total_steps, n_features) tensor, every sequence's steps one "
            f"after another; got {shape}. Build from a list of arrays with "
            "FlatSequences.from_arrays."
        )
    if (not isinstance(lengths, torch.Tensor) or lengths.ndim != 1 or lengths.is_floating_point()
            or lengths.is_complex() or lengths.dtype == torch.bool):
        kind = (f"shape {tuple(lengths.shape)} and dtype {lengths.dtype}" if isinstance(lengths, torch.Tensor)
                else type(lengths).__name__)
        raise ValueError(
            f"lengths must be a 1-D tensor of integers, each sequence's steps; got {kind}. "
            "Pass torch.as_tensor(lengths, dtype=torch.long)."
        )
    if len(lengths) and (int(lengths.min()) < 1 or int(lengths.sum()) > values.shape[0]):
        raise ValueError(
            f"lengths must be at least 1 each and sum to at most the {values.shape[0]} rows of "
            f"values; got lengths from {int(lengths.min())} to {int(lengths.max())} summing to "
            f"{int(lengths.sum())}. Drop empty sequences, and give each sequence's steps as "
            "rows of values."
        )


def _check_rows(values: Any, n: int, name: str, expected: str) -> None:
    """Refuse ``values`` unless it is a tensor (or :class:`FlatSequences`) of ``n`` rows."""
    if not isinstance(values, (torch.Tensor, FlatSequences)):
        raise ValueError(
            f"{name} must be a torch.Tensor ({expected}); got {type(values).__name__}. "
            f"Pass torch.as_tensor({name})."
        )
    if len(values) != n:
        raise ValueError(f"{name} must hold {expected}, {n} for these {n} sequences; got {len(values)}.")


def bucket_batches(
    lengths: np.ndarray,
    batch_size: int,
    *,
    shuffle: bool = False,
    rng: np.random.Generator | None = None,
    pool_batches: int = POOL_BATCHES,
    max_padding: float | None = None,
) -> list[np.ndarray]:
    """Split sample indices into batches of similar lengths.

    Without shuffling, samples are sorted by length (stable) and cut into batches. With
    shuffling, samples are shuffled, grouped into pools of ``pool_batches`` batches,
    sorted by length inside each pool and cut, and the batches are shuffled: batches
    change from epoch to epoch while padding stays small, so an epoch costs about the
    total number of steps rather than ``n * max(T_i)``.

    Parameters
    ----------
    lengths : ndarray of int of shape (n,)
        Steps of each sequence.
    batch_size : int
        Samples per batch (the last batch of a pool may be smaller).
    shuffle : bool, default=False
        Draw a new arrangement from ``rng``.
    rng : numpy.random.Generator, optional
        Required when ``shuffle`` is True.
    pool_batches : int, default=50
        Batches per sorting pool when shuffling.
    max_padding : float, optional
        At least 1. Without shuffling: also end a batch before a sequence that would make the
        batch's padded steps (its size times its longest length) exceed ``max_padding``
        times its valid steps, so that one sequence far longer than the others is not
        padded into a whole batch of short ones (prediction uses 2; its outputs do not
        depend on the batches).

    Returns
    -------
    list of ndarray of int

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_rnn.sequences import bucket_batches
    >>> bucket_batches(np.array([5, 1, 4, 2]), 2)
    [array([1, 3]), array([2, 0])]

    A sequence of 1,000 steps among short ones gets a batch of its own:

    >>> bucket_batches(np.array([3, 1000, 4, 2]), 4, max_padding=2)
    [array([3, 0, 2]), array([1])]
    """
    _check_count(batch_size, "batch_size", "sequences per batch")
    lengths = np.asarray(lengths)
    if lengths.ndim != 1:
        raise ValueError(
            f"lengths must be one-dimensional, the steps of each sequence; got shape {lengths.shape}."
        )
    if max_padding is not None and not (isinstance(max_padding, Real) and max_padding >= 1):
        raise ValueError(
            f"max_padding must be a number of at least 1 (padded steps per valid step of a "
            f"batch) or None; got {max_padding!r}. Pass 2 to bound each batch's padding to "
            "its valid steps, or None for no bound."
        )
    if not shuffle:
        order = np.argsort(lengths, kind="stable")
        if max_padding is None:
            return [order[i : i + batch_size] for i in range(0, len(order), batch_size)]
        return _bounded(order, lengths[order], batch_size, max_padding)
    _check_generator(rng, "rng", "bucket_batches(shuffle=True)")
    _check_count(pool_batches, "pool_batches", "batches per sorting pool")
    permutation = rng.permutation(len(lengths))
    pool = batch_size * pool_batches
    batches = []
    for start in range(0, len(permutation), pool):
        members = permutation[start : start + pool]
        members = members[np.argsort(lengths[members], kind="stable")]
        batches.extend(members[i : i + batch_size] for i in range(0, len(members), batch_size))
    return [batches[i] for i in rng.permutation(len(batches))]


def _bounded(order: np.ndarray, sorted_lengths: np.ndarray, batch_size: int, max_padding: float) -> list[np.ndarray]:
    """``order`` (ascending lengths) cut into batches of at most ``batch_size`` whose
    padded steps stay within ``max_padding`` times their valid steps."""
    batches, start, valid = [], 0, 0
    for position, length in enumerate(sorted_lengths.tolist()):
        size = position - start
        if size and (size == batch_size or (size + 1) * length > max_padding * (valid + length)):
            batches.append(order[start:position])
            start, valid = position, 0
        valid += length
    if len(order):
        batches.append(order[start:])
    return batches


def balanced_batches(
    lengths: np.ndarray,
    labels: np.ndarray,
    batch_size: int,
    *,
    rng: np.random.Generator,
    n_batches: int | None = None,
    pool_batches: int = POOL_BATCHES,
) -> list[np.ndarray]:
    """Draw batches holding the same number of samples of every class, with replacement.

    Each batch holds ``k = max(1, batch_size // n_classes)`` samples of every class,
    drawn with replacement (the lupus study of the thesis drew 10 positives and 10
    negatives per batch of 20): a rare class is seen as often as a common one, and
    its samples are repeated within an epoch. Lengths stay bucketed: for a pool of
    ``pool_batches`` batches, each class's draws are sorted by length and the
    ``j``-th batch takes the ``j``-th run of ``k`` from every class, so the members of
    a batch sit at the same length rank of their class.

    Parameters
    ----------
    lengths : ndarray of int of shape (n,)
        Steps of each sequence.
    labels : ndarray of shape (n,)
        Class of each sequence.
    batch_size : int
        Samples per batch; rounded down to a multiple of the number of classes, or
        up to one sample per class where it holds fewer than the classes.
    rng : numpy.random.Generator
        Source of the draws.
    n_batches : int, optional
        Batches to draw; by default ``ceil(n / batch_size)``: about as many samples as
        an epoch over the data where ``batch_size`` is a multiple of the number of
        classes (10 classes at ``batch_size=4`` draw batches of 10, 2.5 epochs' worth).
    pool_batches : int, default=50
        Batches per sorting pool.

    Returns
    -------
    list of ndarray of int

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_rnn.sequences import balanced_batches
    >>> labels = np.array([0, 0, 0, 0, 0, 0, 1, 1])
    >>> batches = balanced_batches(np.arange(1, 9), labels, 4, rng=np.random.default_rng(0))
    >>> len(batches), [np.bincount(labels[batch]).tolist() for batch in batches]
    (2, [[2, 2], [2, 2]])
    """
    _check_count(batch_size, "batch_size", "sequences per batch")
    _check_count(pool_batches, "pool_batches", "batches per sorting pool")
    _check_generator(rng, "rng", "balanced_batches")
    if n_batches is not None:
        _check_count(n_batches, "n_batches", "batches to draw", minimum=0)
    lengths, labels = np.asarray(lengths), np.asarray(labels)
    if lengths.ndim != 1 or labels.shape != lengths.shape:
        raise ValueError(
            f"lengths and labels must be one-dimensional, one entry per sequence each; got "
            f"shapes {lengths.shape} and {labels.shape}."
        )
    if not len(labels):  # no sequence, no class: no batch
        return []
    classes = np.unique(labels)
    members = [np.flatnonzero(labels == label) for label in classes]
    per_class = max(1, batch_size // len(classes))
    if n_batches is None:
        n_batches = -(-len(labels) // batch_size)
    batches: list[np.ndarray] = []
    for start in range(0, n_batches, pool_batches):
        pool = min(pool_batches, n_batches - start)
        runs = []
        for indices in members:
            draw = rng.choice(indices, size=pool * per_class, replace=True)
            draw = draw[np.argsort(lengths[draw], kind="stable")]
            runs.append(draw.reshape(pool, per_class))  # (pool, k): one row per batch
        batches.extend(np.concatenate([run[j] for run in runs]) for j in range(pool))
    return [batches[i] for i in rng.permutation(len(batches))]


class BucketBatchLoader:
    """Iterate over a :class:`SequenceDataset` in length-bucketed batches.

    A drop-in for :class:`torch.utils.data.DataLoader` in skorch's ``iterator_train``
    and ``iterator_valid`` slots.

    Parameters
    ----------
    dataset : SequenceDataset
        The data.
    batch_size : int
        Samples per batch.
    shuffle : bool, default=False
        New batches every epoch (training); otherwise sorted by length.
    random_state : numpy.random.Generator, optional
        Source of the shuffles; required when ``shuffle`` or ``balanced`` is True.
    balanced : bool, default=False
        Draw class-balanced batches with replacement (:func:`balanced_batches`) from
        the dataset's class labels ``y`` (training only); an epoch is
        ``ceil(n / batch_size)`` batches.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_rnn.sequences import FlatSequences, SequenceDataset, BucketBatchLoader
    >>> data = SequenceDataset(FlatSequences.from_arrays([np.ones((n, 1)) for n in (3, 1, 2)]))
    >>> [inputs["lengths"].tolist() for inputs, _ in BucketBatchLoader(data, batch_size=2)]
    [[1, 2], [3]]
    """

    def __init__(
        self,
        dataset: SequenceDataset,
        batch_size: int,
        shuffle: bool = False,
        random_state: np.random.Generator | None = None,
        balanced: bool = False,
    ) -> None:
        _check_count(batch_size, "batch_size", "sequences per batch")
        if not isinstance(dataset, SequenceDataset):
            raise TypeError(
                f"dataset must be a SequenceDataset; got {type(dataset).__name__}. Build it with "
                "SequenceDataset(FlatSequences.from_arrays(arrays), y)."
            )
        if random_state is not None:
            _check_generator(random_state, "random_state", "BucketBatchLoader")
        self.dataset = dataset
        self.batch_size = batch_size
        self.shuffle = shuffle
        self.random_state = random_state
        self.balanced = balanced

    def batches(self) -> list[np.ndarray]:
        """The index batches of one pass, in iteration order.

        Returns
        -------
        list of ndarray of int
        """
        lengths = self.dataset.sequences.lengths.cpu().numpy()
        if self.balanced:
            return balanced_batches(
                lengths, self._labels(), self.batch_size, rng=self._generator("balanced")
            )
        rng = self._generator("shuffle") if self.shuffle else self.random_state
        return bucket_batches(lengths, self.batch_size, shuffle=self.shuffle, rng=rng)

    def __iter__(self) -> Iterator[tuple[dict[str, torch.Tensor], torch.Tensor | None]]:
        for indices in self.batches():
            yield self.dataset.collate(indices)

    def _labels(self) -> np.ndarray:
        y = self.dataset.y
        # Float targets are values, every distinct one a "class" (batches of all n sequences).
        if not isinstance(y, torch.Tensor) or y.ndim != 1 or y.is_floating_point():
            if y is None:
                given, fix = "no targets (a dataset to predict)", "Use balanced=False to predict."
            elif isinstance(y, FlatSequences):
                given = f"per-step targets (a FlatSequences of {len(y)} sequences)"
                fix = "Use balanced=False, or give one label per sequence."
            else:
                given = f"y of shape {tuple(y.shape)} and dtype {y.dtype}" if isinstance(y, torch.Tensor) else (
                    f"y of type {type(y).__name__}")
                fix = "Use balanced=False for regression targets."
            raise ValueError(
                "balanced batches draw by one integer class label per sequence (a dataset y "
                f"of shape (n,)); got {given}. {fix}"
            )
        return y.cpu().numpy()

    def _generator(self, option: str) -> np.random.Generator:
        if self.random_state is None:
            raise ValueError(
                f"BucketBatchLoader({option}=True) needs a numpy Generator as random_state, "
                "e.g. numpy.random.default_rng(0)."
            )
        return self.random_state

    def __len__(self) -> int:
        n = len(self.dataset)
        if self.balanced:
            return -(-n // self.batch_size)
        if not self.shuffle:
            return -(-n // self.batch_size)
        pool = self.batch_size * POOL_BATCHES
        return (n // pool) * POOL_BATCHES + -(-(n % pool) // self.batch_size)
