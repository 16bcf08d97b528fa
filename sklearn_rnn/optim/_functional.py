"""Pure functional core of the simplex direction (thesis eq. 3.3-3.6, algorithm 3.2).

Every function here works on plain tensors: per-step gradients are given as a sequence
of blocks, one per parameter, each of shape ``(steps, *parameter_shape)``, and gradients
or directions as a sequence of blocks of the parameters' shapes. Nothing is
materialized per step by :class:`SimplexSGD`, which feeds the same functions with norms
and combinations computed without the ``(steps, ...)`` blocks; these functions are
what unit tests check by hand on tiny tensors.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from numbers import Integral, Real
from typing import Any, Literal, NamedTuple

import torch

from ..nn._network import _check_generator

__all__ = [
    "BRANCHES",
    "Direction",
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
]

#: Norms below this are left unnormalized (REFERENCE.md: "below 1e-8").
NORM_EPS: float = 1e-8

#: Rules for the random convex weights ``beta`` of eq. 3.4.
WEIGHT_RULES: tuple[str, ...] = ("exp", "dirichlet", "uniform")

#: Which direction an update took: the simplex direction; the anti-gradient because the
#: simplex candidate was not a descent direction; the anti-gradient because the
#: gradient norm exceeded the switching threshold; no step because the gradient was
#: not finite.
BRANCHES: tuple[str, ...] = ("simplex", "descent_fallback", "switched", "skipped")

Branch = Literal["simplex", "descent_fallback", "switched", "skipped"]
WeightRule = Literal["exp", "dirichlet", "uniform"]

def _overflowed(norms: torch.Tensor) -> bool:
    """Whether some per-step norm is not finite, to be recomputed without overflow
    (infinite where squares overflowed; NaN where the Gram method's products did, with
    both signs): one value read on the host."""
    return not bool(torch.isfinite(norms).all())


class Direction(NamedTuple):
    """An update direction and how it was chosen.

    Attributes
    ----------
    direction : tuple of torch.Tensor or None
        One block per parameter (the direction ``d``, to be *added* times the step
        size); None when the step is skipped.
    branch : {'simplex', 'descent_fallback', 'switched', 'skipped'}
        Which branch of algorithm 3.2 produced it (see :data:`BRANCHES`).
    gradient_norm : float
        ``||grad L||`` over all blocks together.
    cosine : float
        Cosine between ``direction`` and the gradient: -1 for the anti-gradient,
        negative for an accepted simplex direction, NaN when skipped.

    Examples
    --------
    >>> import torch
    >>> from sklearn_rnn.optim import choose_direction
    >>> chosen = choose_direction([torch.tensor([1.0])], [torch.tensor([2.0])])
    >>> chosen.branch, chosen.direction
    ('simplex', (tensor([-1.]),))
    """

    direction: tuple[torch.Tensor, ...] | None
    branch: Branch
    gradient_norm: float
    cosine: float


def step_norms(temporal: Sequence[torch.Tensor]) -> torch.Tensor:
    """One norm per step over the concatenation of all parameter blocks.

    The squares are summed in the blocks' dtype, at least float32: in float16 the square
    of any entry below about 2.4e-4 is zero, and a small step's norm would vanish. Where
    the squares of finite entries overflow (above about 1.8e19 in float32: an exploding
    gradient), the step's norm is recomputed on its entries divided by their largest
    magnitude, so that it is infinite only where an entry is (or where the norm itself
    is past the dtype's range), and its step is normalized as any other.

    Parameters
    ----------
    temporal : sequence of torch.Tensor, each of shape (steps, ...)
        The temporal gradients, one block per parameter.

    Returns
    -------
    torch.Tensor of shape (steps,)
        In the blocks' dtype, at least float32.

    Examples
    --------
    >>> import torch
    >>> from sklearn_rnn.optim import step_norms
    >>> w = torch.tensor([[3.0, 0.0], [0.0, 0.0]])  # step 1: (3, 0), step 2: (0, 0)
    >>> b = torch.tensor([[4.0], [0.0]])           # step 1: 4,      step 2: 0
    >>> step_norms([w, b])
    tensor([5., 0.])
    """
    _check_steps(temporal)
    return _step_norms(temporal, rescue=True)


def _step_norms(temporal: Sequence[torch.Tensor], *, rescue: bool) -> torch.Tensor:
    """:func:`step_norms`; with ``rescue=False`` as computed, without reading on the host
    whether squares overflowed (then a norm is infinite or NaN)."""
    squares = [
        block.reshape(block.shape[0], -1).to(_working_dtype(block.dtype)).square().sum(1) for block in temporal
    ]  # (T,) each
    norms = torch.stack(squares).sum(0).sqrt()  # (T,)
    if not rescue or not _overflowed(norms):
        return norms
    flat = torch.cat([block.reshape(block.shape[0], -1).to(norms.dtype) for block in temporal], dim=1)  # (T, P)
    return _rescued_row_norms(flat, norms, None)


def normalization_factors(norms: torch.Tensor, *, eps: float | torch.Tensor = NORM_EPS) -> torch.Tensor:
    """The factor that normalizes each step: ``1 / norm``, or 1 where that is unsafe.

    Steps whose norm is zero, below ``eps``, NaN or infinite are left unnormalized (factor 1):
    dividing a vanished gradient by its norm would blow numerical noise up to unit
    length, and a non-finite norm is dealt with by the caller.

    Parameters
    ----------
    norms : torch.Tensor of shape (steps,) or (models, steps)
        Per-step norms, from :func:`step_norms`; a leading model axis for several
        models at once.
    eps : float or torch.Tensor, default=1e-8
        Smallest norm that is normalized (a tensor broadcast against ``norms``, such as
        ``(models, 1)``, gives each model its own).

    Returns
    -------
    torch.Tensor, shaped as ``norms``

    Examples
    --------
    >>> import torch
    >>> from sklearn_rnn.optim import normalization_factors
    >>> normalization_factors(torch.tensor([2.0, 1e-9, float("nan"), float("inf")]))
    tensor([0.5000, 1.0000, 1.0000, 1.0000])
    >>> normalization_factors(torch.tensor([2.0, 0.0]), eps=0.0)  # a zero norm even then
    tensor([0.5000, 1.0000])
    """
    if isinstance(eps, torch.Tensor) and eps.ndim > 0:
        if not bool((eps >= 0).all()):  # NaN too
            raise ValueError(f"eps must be non-negative for every model; got {eps!r}. {_EPS_FIX}")
    else:
        _check_eps(eps)
    return _normalization_factors(norms, eps)


def _normalization_factors(norms: torch.Tensor, eps: float | torch.Tensor) -> torch.Tensor:
    """:func:`normalization_factors` without checking ``eps`` (the optimizers checked it)."""
    usable = torch.isfinite(norms) & (norms >= eps) & (norms > 0)  # (T,); eps may be 0
    return torch.where(usable, 1.0 / torch.where(usable, norms, torch.ones_like(norms)), 1.0)


def normalize_temporal_gradients(
    temporal: Sequence[torch.Tensor], *, eps: float = NORM_EPS
) -> tuple[torch.Tensor, ...]:
    """Eq. 3.3: divide each step's gradient by its norm over all blocks.

    Parameters
    ----------
    temporal : sequence of torch.Tensor, each of shape (steps, ...)
        The temporal gradients, one block per parameter.
    eps : float, default=1e-8
        Steps with a smaller norm (or a NaN or infinite one) are left as they are.

    Returns
    -------
    tuple of torch.Tensor
        The normalized blocks, shaped like ``temporal`` and in their dtype (the norms and
        factors are computed in at least float32).

    Examples
    --------
    >>> import torch
    >>> from sklearn_rnn.optim import normalize_temporal_gradients
    >>> w = torch.tensor([[3.0], [0.0]])
    >>> b = torch.tensor([[4.0], [1e-9]])
    >>> normalize_temporal_gradients([w, b])
    (tensor([[0.6000], [0.0000]]), tensor([[8.0000e-01], [1.0000e-09]]))
    """
    factors = normalization_factors(step_norms(temporal), eps=eps)  # (T,), eps checked
    return tuple((block * factors.view(-1, *([1] * (block.ndim - 1)))).to(block.dtype) for block in temporal)


def convex_weights(
    steps: int,
    rule: WeightRule = "exp",
    *,
    generator: torch.Generator | None = None,
    dtype: torch.dtype = torch.float64,
    device: torch.device | str | None = None,
) -> torch.Tensor:
    """Random convex weights ``beta`` (positive, summing to one) for eq. 3.4.

    Parameters
    ----------
    steps : int
        Number of weights.
    rule : {'exp', 'dirichlet', 'uniform'}, default='exp'
        ``'exp'``: ``u ~ U(0, 1)^T``, ``beta = exp(1 - u) / sum(exp(1 - u))``, the rule
        of the thesis' final code (near uniform: two weights differ by at most a factor
        e). ``'dirichlet'``: a flat Dirichlet draw. ``'uniform'``: ``u / sum(u)``.
    generator : torch.Generator, optional
        A CPU generator; draws are made on the CPU in float64, so they do not depend on
        ``device``, ``dtype`` or PyTorch's default device.
    dtype : torch.dtype, default=torch.float64
        Type of the result.
    device : torch.device or str, optional
        Device of the result; the CPU when None. On a GPU the draws travel from pinned host memory, so
        that the copy does not wait for the kernels queued before it.

    Returns
    -------
    torch.Tensor of shape (steps,)

    Examples
    --------
    >>> import torch
    >>> from sklearn_rnn.optim import convex_weights
    >>> beta = convex_weights(4, "exp", generator=torch.Generator().manual_seed(0))
    >>> round(beta.sum().item(), 12), bool((beta.max() / beta.min()) <= torch.e)
    (1.0, True)
    """
    if rule not in WEIGHT_RULES:
        raise ValueError(
            f"weights must be one of {list(WEIGHT_RULES)}; got {rule!r}. 'exp' is the rule "
            "of the thesis' original code."
        )
    if isinstance(steps, bool) or not isinstance(steps, Integral) or steps < 1:
        raise ValueError(
            f"steps must be an int of at least 1, the number of weights (one per step); got "
            f"{steps!r} of type {type(steps).__name__}."
        )
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:  # int weights came back as zeros
        raise ValueError(f"dtype must be a floating-point torch.dtype, such as torch.float64; got {dtype!r}.")
    _check_generator(generator)  # an int seed reached torch.rand's signature listing
    if rule == "dirichlet":
        # A flat Dirichlet is a vector of i.i.d. Exp(1) draws normalized to sum one.
        draw = torch.empty(steps, dtype=torch.float64, device="cpu").exponential_(generator=generator)  # (T,)
    else:
        u = torch.rand(steps, generator=generator, dtype=torch.float64, device="cpu")  # (T,)
        draw = torch.exp(1.0 - u) if rule == "exp" else u
    beta = (draw / draw.sum()).to(dtype)
    if device is None or torch.device(device).type != "cuda":
        return beta.to(device)
    # From pinned memory the copy need not wait for the device; from ordinary memory it
    # would wait for every kernel queued before it (the forward and backward passes).
    return beta.pin_memory().to(device, non_blocking=True)


def combine_temporal_gradients(
    temporal: Sequence[torch.Tensor], coefficients: torch.Tensor
) -> tuple[torch.Tensor, ...]:
    """``sum_t c_t * G_t`` for every block: a weighted sum over steps.

    With ``c = beta * normalization_factors(norms)`` this is the combination of eq. 3.4.

    Parameters
    ----------
    temporal : sequence of torch.Tensor, each of shape (steps, ...)
        The temporal gradients.
    coefficients : torch.Tensor of shape (steps,)
        One coefficient per step.

    Returns
    -------
    tuple of torch.Tensor
        One block per parameter, without the step axis, in the blocks' dtype, at least
        float32 (a float16 block could not hold the factors ``1 / norm`` of small steps).

    Examples
    --------
    >>> import torch
    >>> from sklearn_rnn.optim import combine_temporal_gradients
    >>> w = torch.tensor([[1.0, 0.0], [0.0, 2.0]])
    >>> combine_temporal_gradients([w], torch.tensor([0.25, 0.5]))
    (tensor([0.2500, 1.0000]),)
    """
    _check_steps(temporal)
    if coefficients.shape != (temporal[0].shape[0],):
        raise ValueError(
            f"coefficients must have shape ({temporal[0].shape[0]},), one per step; got "
            f"{tuple(coefficients.shape)}."
        )
    return tuple(
        torch.tensordot(coefficients.to(_working_dtype(block.dtype)), block.to(_working_dtype(block.dtype)), dims=1)
        for block in temporal
    )


def choose_direction(
    gradient: Sequence[torch.Tensor],
    combination: Sequence[torch.Tensor] | Callable[[], Sequence[torch.Tensor]],
    *,
    switch_threshold: float | None = None,
) -> Direction:
    """Eq. 3.5 and lines 11-12 of algorithm 3.2: turn a combination into the direction.

    In order: a non-finite gradient skips the step; a gradient norm above
    ``switch_threshold`` gives the anti-gradient (``'switched'``; the pseudocode's
    ``d <- grad`` is a sign typo); otherwise the combination ``g`` is rescaled to
    ``d = -||grad|| g / ||g||``, and replaced by the anti-gradient when it is not a
    descent direction (``d . grad >= 0``, or ``g`` zero or not finite:
    ``'descent_fallback'``).

    Parameters
    ----------
    gradient : sequence of torch.Tensor
        The full gradient, one block per parameter.
    combination : sequence of torch.Tensor, or callable returning one
        The convex combination ``g`` of normalized temporal gradients, blocks shaped as
        ``gradient``. A callable is only called when needed (not when switching), which
        saves its cost.
    switch_threshold : float or None, default=None
        ``psi``; None never switches.

    Returns
    -------
    Direction

    Examples
    --------
    >>> import torch
    >>> from sklearn_rnn.optim import choose_direction
    >>> grad = [torch.tensor([3.0, 4.0])]                     # norm 5
    >>> choose_direction(grad, [torch.tensor([0.0, 1.0])])    # rescaled to norm 5
    Direction(direction=(tensor([-0., -5.]),), branch='simplex', gradient_norm=5.0, cosine=-0.8)
    >>> choose_direction(grad, [torch.tensor([-1.0, 0.0])]).branch  # ascent: fall back
    'descent_fallback'
    >>> choose_direction(grad, [torch.tensor([0.0, 1.0])], switch_threshold=1.0).branch
    'switched'
    """
    _check_switch_threshold(switch_threshold)
    gradient = tuple(gradient)
    if not gradient:  # torch.cat's "expected a non-empty list of Tensors"
        raise ValueError("gradient must hold one block per parameter; got no blocks.")
    flat_gradient = _flatten(gradient)  # (1, P)
    sizes = [block.numel() for block in gradient]
    work = _working_dtype(flat_gradient.dtype)
    wide = flat_gradient.to(work)
    gradient_norm, (norm,) = _read_row_norms(wide, _row_norms(wide, sizes), sizes)  # (1,), its value
    if _needs_combination(norm, switch_threshold):
        combined = tuple(combination() if callable(combination) else combination)
        if [tuple(block.shape) for block in combined] != [tuple(block.shape) for block in gradient]:
            raise ValueError(
                f"combination must have one block per gradient block, shaped as it is: expected "
                f"shapes {[tuple(block.shape) for block in gradient]}; got "
                f"{[tuple(block.shape) for block in combined]}."
            )
        flat_combination = _flatten(combined, work)
    else:
        flat_combination = torch.zeros_like(flat_gradient)  # not looked at
    chosen = _choose_directions(flat_gradient, gradient_norm, flat_combination, [switch_threshold], sizes)
    return _unflatten(chosen, gradient)


class _Directions(NamedTuple):
    """The directions of ``M`` models at once (:func:`_choose_directions`)."""

    direction: torch.Tensor  # (M, P); zero rows for skipped models
    branch: list[Branch]
    gradient_norm: list[float]
    cosine: list[float]


def _needs_combination(gradient_norm: float, switch_threshold: float | None) -> bool:
    """Whether a model looks at its combination: a finite gradient norm, at most ``psi``."""
    return math.isfinite(gradient_norm) and not (switch_threshold is not None and gradient_norm > switch_threshold)


def _choose_directions(
    gradient: torch.Tensor,
    gradient_norm: torch.Tensor,
    combination: torch.Tensor,
    switch_threshold: Sequence[float | None],
    sizes: Sequence[int] | None = None,
    recombine: tuple[torch.Tensor, Callable[[], torch.Tensor]] | None = None,
) -> _Directions:
    """:func:`choose_direction` for ``M`` models at once, on flat ``(M, P)`` tensors.

    The one implementation of eq. 3.5 and lines 11-12 of algorithm 3.2 (the per-model
    rule calls it with ``M = 1``): the norms and inner products of all models are
    computed together, the branch of each is decided on them as Python floats, and the
    directions are formed together. ``gradient_norm`` ``(M,)`` is the caller's
    :func:`_row_norms` of ``gradient`` (it has decided on it already); ``switch_threshold``
    holds each model's ``psi`` (None: never switch); ``sizes``, the parameter blocks
    along ``P``, makes the combination's norm that of :func:`_row_norms` too.
    ``recombine``, ``(overflowed, redo)``: ``overflowed`` ``(M,)`` flags the models some of
    whose per-step norms were not finite when the combination was formed (read on the host
    with the statistics); if any is, ``redo()`` forms the combination again (from norms
    recomputed without overflow).

    Everything is computed in the gradient's dtype, at least float32 (float16 squares
    and products underflow), and only the directions are cast to the gradient's dtype.
    """
    dtype = gradient.dtype
    work = _working_dtype(dtype)
    gradient, gradient_norm, combination = gradient.to(work), gradient_norm.to(work), combination.to(work)

    def statistics(flags: list[torch.Tensor]) -> torch.Tensor:
        return torch.stack([
            gradient_norm,
            _row_norms(combination, sizes),
            (combination * gradient).sum(1),
            *flags,
        ])  # (3, M): ||grad||, ||g||, g . grad; a row more per flag

    if recombine is None:
        on_device = statistics([])
        stats = on_device.tolist()
    else:
        on_device = statistics([recombine[0].to(work)])
        *stats, overflowed = on_device.tolist()
        on_device = on_device[:3]
        if any(overflowed):
            combination = recombine[1]().to(work)
            on_device = statistics([])
            stats = on_device.tolist()
    # Squares or products of finite entries past the dtype's range: an infinite norm, and
    # an infinite or NaN (inf + -inf) inner product, whichever the combination's scale.
    if not all(math.isfinite(value) for row in stats for value in row):
        on_device, stats = _rescued_statistics(gradient, combination, on_device, sizes)
    branches: list[Branch] = []
    cosines = []
    for gradient_norm, combined_norm, dot, psi in zip(*stats, switch_threshold):
        cosine = -1.0
        if not math.isfinite(gradient_norm):
            branch: Branch = "skipped"
            cosine = math.nan
        elif not _needs_combination(gradient_norm, psi):
            branch = "switched"
        elif math.isfinite(combined_norm) and combined_norm > 0 and gradient_norm > 0 and \
                (-gradient_norm / combined_norm) * dot / (gradient_norm * gradient_norm) < 0:
            # d = -||grad|| g / ||g||; d . grad < 0 is the descent condition, its cosine
            # is what logs report.
            branch = "simplex"
            cosine = (-gradient_norm / combined_norm) * dot / (gradient_norm * gradient_norm)
        else:
            branch = "descent_fallback"
        branches.append(branch)
        cosines.append(cosine)
    simplex = [branch == "simplex" for branch in branches]
    if any(simplex):
        # d = -||grad|| g / ||g||, the factor divided where the norms are (a copy from
        # the host would make it wait for a GPU): a division rounded once to the working
        # dtype equals the host's in float64 rounded to it (53 >= 2 p + 2 bits).
        candidate = (-on_device[0] / on_device[1])[:, None] * combination  # (M, P)
    if all(simplex):
        direction = candidate
    elif not any(simplex) and "skipped" not in branches:
        direction = -gradient  # every row switched or fell back; no signs copied from the host
    else:
        anti = [0.0 if branch in ("simplex", "skipped") else -1.0 for branch in branches]
        anti_gradient = torch.tensor(anti, dtype=work, device=gradient.device)[:, None] * gradient
        anti_gradient = torch.where(torch.isfinite(anti_gradient), anti_gradient, 0.0)  # skipped rows
        if any(simplex):
            mask = torch.tensor(simplex, device=gradient.device)[:, None]
            direction = torch.where(mask, candidate, anti_gradient)  # (M, P)
        else:
            direction = anti_gradient
    return _Directions(direction.to(dtype), branches, stats[0], cosines)


def _row_norms(flat: torch.Tensor, sizes: Sequence[int] | None) -> torch.Tensor:
    """The Euclidean norm of each row of ``flat`` ``(M, P)``, shape ``(M,)``: with
    ``sizes`` (the parameter blocks along ``P``) the norm of the blocks' norms, so that
    a model's norm is rounded as it was when the rule took its blocks one by one.

    The squares of finite entries may overflow (an infinite norm): the callers read the
    norms on the host and then rescue them (:func:`_rescued_row_norms`)."""
    if sizes is None or len(sizes) < 2:
        return torch.linalg.vector_norm(flat, dim=1)
    blocks = torch.split(flat, list(sizes), dim=1)
    per_block = torch.stack([torch.linalg.vector_norm(block, dim=1) for block in blocks], dim=1)
    return torch.linalg.vector_norm(per_block, dim=1)


def _row_scales(flat: torch.Tensor) -> torch.Tensor:
    """Each row's largest magnitude ``(M,)``, or 1 where it is zero or not finite."""
    largest = flat.abs().amax(1)  # (M,)
    return torch.where(torch.isfinite(largest) & (largest > 0), largest, torch.ones_like(largest))


def _rescued_row_norms(flat: torch.Tensor, norms: torch.Tensor, sizes: Sequence[int] | None) -> torch.Tensor:
    """``norms``, the :func:`_row_norms` of ``flat``, with the infinite ones recomputed on
    the rows divided by their largest magnitude: finite where the row is finite and its
    norm representable (only its squares overflowed); a row with an infinite entry keeps
    its infinite norm, and a NaN stays NaN."""
    scale = _row_scales(flat)  # (M,)
    return torch.where(torch.isinf(norms), _row_norms(flat / scale[:, None], sizes) * scale, norms)


def _rescued_statistics(
    gradient: torch.Tensor, combination: torch.Tensor, on_device: torch.Tensor, sizes: Sequence[int] | None
) -> tuple[torch.Tensor, list[list[float]]]:
    """The ``(3, M)`` statistics of :func:`_choose_directions` (``||grad||``, ``||g||``,
    ``g . grad``), the non-finite ones recomputed on rows divided by their largest
    magnitude (squares or products of finite entries past the dtype's range: an
    exploding gradient; an inner product whose terms overflow with both signs is
    ``inf - inf``, NaN): the norms on the device, where the candidate divides them, and
    the products on the host in float64, where the two scales' product fits. Also their
    host values, as lists. A row with an infinite or NaN entry keeps a non-finite value
    (its largest magnitude is not finite, and it is not divided)."""
    gradient_scale, combination_scale = _row_scales(gradient), _row_scales(combination)  # (M,) each
    gradient_unit, combination_unit = gradient / gradient_scale[:, None], combination / combination_scale[:, None]
    on_device = torch.stack([
        torch.where(torch.isfinite(on_device[0]), on_device[0], _row_norms(gradient_unit, sizes) * gradient_scale),
        torch.where(torch.isfinite(on_device[1]), on_device[1], _row_norms(combination_unit, sizes) * combination_scale),
        on_device[2],
    ])
    unit_dot = (gradient_unit * combination_unit).sum(1)  # (M,)
    gradient_norm, combined_norm, dots, unit_dots, scales_a, scales_b = torch.cat(
        [on_device, torch.stack([unit_dot, gradient_scale, combination_scale])]
    ).tolist()
    dots = [dot if math.isfinite(dot) else unit * a * b for dot, unit, a, b in zip(dots, unit_dots, scales_a, scales_b)]
    return on_device, [gradient_norm, combined_norm, dots]


def _read_row_norms(
    flat: torch.Tensor, norms: torch.Tensor, sizes: Sequence[int] | None
) -> tuple[torch.Tensor, list[float]]:
    """``norms`` (the :func:`_row_norms` of ``flat``) read on the host, rescued first
    where they overflowed (:func:`_rescued_row_norms`): the norms and their values."""
    values = norms.tolist()
    if any(math.isinf(value) for value in values):
        norms = _rescued_row_norms(flat, norms, sizes)
        values = norms.tolist()
    return norms, values


def _flatten(blocks: Sequence[torch.Tensor], dtype: torch.dtype | None = None) -> torch.Tensor:
    """Blocks as one row ``(1, P)``."""
    flat = torch.cat([block.reshape(-1) for block in blocks])  # (P,): in their common dtype
    return (flat if dtype is None or flat.dtype == dtype else flat.to(dtype))[None]


def _unflatten(chosen: _Directions, like: Sequence[torch.Tensor]) -> Direction:
    """The first model's direction of ``chosen`` as a :class:`Direction` with blocks like ``like``."""
    branch, gradient_norm, cosine = chosen.branch[0], chosen.gradient_norm[0], chosen.cosine[0]
    if branch == "skipped":
        return Direction(None, "skipped", gradient_norm, cosine)
    pieces = torch.split(chosen.direction[0], [block.numel() for block in like])
    direction = tuple(piece.view(block.shape) for piece, block in zip(pieces, like))
    return Direction(direction, branch, gradient_norm, cosine)


def simplex_direction(
    temporal: Sequence[torch.Tensor],
    gradient: Sequence[torch.Tensor] | None = None,
    *,
    weights: WeightRule = "exp",
    generator: torch.Generator | None = None,
    switch_threshold: float | None = None,
    eps: float = NORM_EPS,
) -> Direction:
    """The whole direction rule of algorithm 3.2 on materialized temporal gradients.

    Normalize each step (eq. 3.3), combine with fresh random convex weights (eq. 3.4),
    rescale to the gradient's norm and negate (eq. 3.5), fall back to the anti-gradient
    when that is not a descent direction, and switch to the anti-gradient when the
    gradient norm exceeds ``switch_threshold``. The weights are drawn even when
    switching, so that the random stream does not depend on the branch taken.

    Parameters
    ----------
    temporal : sequence of torch.Tensor, each of shape (steps, ...)
        The temporal gradients, one block per parameter.
    gradient : sequence of torch.Tensor, optional
        The full gradient; their sum over steps when None.
    weights : {'exp', 'dirichlet', 'uniform'}, default='exp'
        Rule of :func:`convex_weights`.
    generator : torch.Generator, optional
        Source of the random weights.
    switch_threshold : float or None, default=None
        ``psi``; None never switches.
    eps : float, default=1e-8
        Steps with a smaller norm are left unnormalized.

    Returns
    -------
    Direction

    Examples
    --------
    >>> import torch
    >>> from sklearn_rnn.optim import simplex_direction
    >>> temporal = [torch.tensor([[0.0, 2.0], [1.0, 0.0]])]  # two steps, one block
    >>> d = simplex_direction(temporal, generator=torch.Generator().manual_seed(0))
    >>> d.branch, round(d.gradient_norm, 4), torch.linalg.vector_norm(d.direction[0]).item()
    ('simplex', 2.2361, 2.2360...)
    """
    _check_steps(temporal)
    _check_direction_settings(switch_threshold, weights, eps)
    if gradient is None:
        gradient = tuple(block.sum(0) for block in temporal)
    else:
        _check_gradient_blocks(gradient, temporal)
    return _simplex_rule(
        gradient,
        temporal[0].shape[0],
        lambda rescue: _step_norms(temporal, rescue=rescue),
        lambda coefficients: combine_temporal_gradients(temporal, coefficients),
        dtype=temporal[0].dtype,
        weights=weights,
        generator=generator,
        switch_threshold=switch_threshold,
        eps=eps,
    )


def _simplex_rule(
    gradient: Sequence[torch.Tensor],
    steps: int,
    norms: Callable[[bool], torch.Tensor],
    combine: Callable[[torch.Tensor], Sequence[torch.Tensor]],
    *,
    dtype: torch.dtype,
    weights: WeightRule,
    generator: torch.Generator | None,
    switch_threshold: float | None,
    eps: float,
) -> Direction:
    """Algorithm 3.2's direction, given how to get per-step norms and combinations.

    The one assembly of eq. 3.3-3.5 and the switching: :func:`simplex_direction` passes
    functions of materialized per-step gradients, :class:`SimplexSGD` those of
    :class:`TemporalGradients`, which never materializes them. The weights are drawn
    first, on every branch, so that the random stream does not depend on the branch;
    ``norms(rescue)`` gives the per-step norms (see :func:`_simplex_rules`); ``norms`` and
    ``combine`` are only called when the combination is needed.
    """
    flat_gradient = _flatten(gradient)  # (1, P)
    sizes = [block.numel() for block in gradient]

    def combine_flat(coefficients: torch.Tensor) -> torch.Tensor:
        return _flatten(combine(coefficients[0]), _working_dtype(flat_gradient.dtype))

    chosen = _simplex_rules(
        flat_gradient,
        [steps],
        steps,
        lambda rescue: norms(rescue)[None],
        combine_flat,
        dtype=dtype,
        weights=[weights],
        generators=[generator],
        switch_threshold=[switch_threshold],
        eps=eps,
        sizes=sizes,
    )
    return _unflatten(chosen, gradient)


def _simplex_rules(
    gradient: torch.Tensor,
    steps: Sequence[int],
    total_steps: int,
    norms: Callable[[bool], torch.Tensor],
    combine: Callable[[torch.Tensor], torch.Tensor],
    *,
    dtype: torch.dtype,
    weights: Sequence[WeightRule],
    generators: Sequence[torch.Generator | None],
    switch_threshold: Sequence[float | None],
    eps: float | torch.Tensor,
    sizes: Sequence[int] | None = None,
) -> _Directions:
    """Algorithm 3.2's direction for ``M`` models at once: the one assembly of eq. 3.3-3.5.

    ``gradient`` is ``(M, P)``; ``norms(rescue)`` gives the per-step norms ``(M, total_steps)``
    (with ``rescue=False`` as computed, infinite or NaN where squares overflowed, without
    reading anything on the host; with ``rescue=True`` recomputed there without overflow)
    and ``combine(c)`` the combinations ``(M, P)`` for coefficients ``(M, total_steps)``.
    Model ``m`` draws ``steps[m]`` convex weights from ``generators[m]`` with rule
    ``weights[m]`` (first, on every branch, so that its random stream does not depend on
    the branch), which sit on its last ``steps[m]`` aligned steps (last-step alignment: a
    model's steps before those have zero gradients). ``switch_threshold`` holds each
    model's ``psi`` (None: never), ``eps`` is a float or ``(M, 1)``, ``sizes`` the
    parameter blocks along ``P`` (see :func:`_row_norms`). ``norms`` and ``combine`` are
    only called when some model needs its combination. The weights, norms and
    coefficients are in ``dtype``, at least float32 (``1 / norm`` of a small step
    overflows float16); only the directions are in the gradient's dtype.
    """
    device = gradient.device
    dtype = _working_dtype(dtype)
    draws = [
        convex_weights(count, rule, generator=generator, dtype=dtype, device=device)
        for count, rule, generator in zip(steps, weights, generators)
    ]
    if all(count == total_steps for count in steps):
        beta = torch.stack(draws)  # (M, T)
    else:
        beta = torch.zeros(len(steps), total_steps, dtype=dtype, device=device)  # (M, T)
        for row, (count, draw) in enumerate(zip(steps, draws)):
            beta[row, total_steps - count :] = draw
    wide = gradient.to(_working_dtype(gradient.dtype))
    gradient_norm = _row_norms(wide, sizes)  # (M,)
    # Without switching every finite gradient needs its combination, and a non-finite
    # one's is never looked at: no need to read the norms on the host (on a GPU, a wait
    # for the device) before combining.
    needed = all(psi is None for psi in switch_threshold)
    if not needed:
        gradient_norm, values = _read_row_norms(wide, gradient_norm, sizes)
        needed = any(_needs_combination(norm, psi) for norm, psi in zip(values, switch_threshold))
    recombine = None
    if needed:
        # Without a read on the host: a step norm whose squares overflowed comes back
        # infinite (or NaN), and its step unnormalized; whether any did is read with the
        # branch's inputs, and then the combination is formed again from norms recomputed
        # without overflow.
        norms_as_computed = norms(False)  # (M, T)
        combination = combine(beta * _normalization_factors(norms_as_computed, eps))  # (M, P)
        recombine = (
            ~torch.isfinite(norms_as_computed).all(1),  # (M,)
            lambda: combine(beta * _normalization_factors(norms(True), eps)),
        )
    else:
        combination = torch.zeros_like(gradient)  # not looked at
    return _choose_directions(gradient, gradient_norm, combination, switch_threshold, sizes, recombine)


def clipped_step_size(direction_norm: float, learning_rate: float, clip_threshold: float | None) -> float:
    """Step length of eq. 3.6: ``mu`` if ``||d|| <= tau``, else ``mu * tau / ||d||``.

    A non-finite norm gets ``mu``, as in the original implementation (the caller decides
    what to do with a non-finite direction); ``clip_threshold=None`` never clips.

    Parameters
    ----------
    direction_norm : float
        Euclidean norm of the whole update direction (all parameters together).
    learning_rate : float
        ``mu``.
    clip_threshold : float or None
        ``tau``.

    Returns
    -------
    float

    Examples
    --------
    >>> from sklearn_rnn.optim import clipped_step_size
    >>> clipped_step_size(0.5, 0.01, 1.0), clipped_step_size(4.0, 0.01, 1.0)
    (0.01, 0.0025)
    """
    _check_step_settings({"lr": learning_rate, "clip_threshold": clip_threshold})
    try:
        norm = float(direction_norm)
    except (TypeError, ValueError):
        norm = None
    if norm is None or norm < 0:  # a norm is never negative (-inf too): it got mu, unclipped
        raise ValueError(
            f"direction_norm must be a non-negative number (||d|| of the whole direction); got "
            f"{direction_norm!r}."
        )
    return _step_size(norm, learning_rate, clip_threshold)


def _step_size(direction_norm: float, learning_rate: float, clip_threshold: float | None) -> float:
    """:func:`clipped_step_size` without checking its settings (the optimizers checked
    theirs; the stacked trainer calls it for every model at every step)."""
    # float(): a 0-d tensor learning rate or threshold (which the optimizers accept)
    # gives a float step, as documented, not a tensor.
    if clip_threshold is None or not math.isfinite(direction_norm) or direction_norm <= clip_threshold:
        return float(learning_rate)
    return float(learning_rate * clip_threshold / direction_norm)


def clipped_step_(
    params: Iterable[torch.Tensor],
    direction: Sequence[torch.Tensor],
    *,
    lr: float,
    clip_threshold: float | None,
    direction_norm: float | None = None,
) -> float:
    """``theta <- theta + alpha * d`` with the step ``alpha`` of eq. 3.6, in place.

    Parameters
    ----------
    params : iterable of torch.Tensor
        The parameters, in the order of ``direction``.
    direction : sequence of torch.Tensor
        The direction ``d`` (already signed: the anti-gradient is ``-grad``).
    lr : float
        ``mu``.
    clip_threshold : float or None
        ``tau``; None never clips.
    direction_norm : float, optional
        ``||d||`` over the whole direction, when ``direction`` is only part of it (a
        parameter group); computed from ``direction`` when None.

    Returns
    -------
    float
        The step size ``alpha`` used.

    Raises
    ------
    ValueError
        Settings the optimizers refuse, blocks of another shape than their parameters,
        a negative ``direction_norm``, or a direction whose norm is not finite
        (nothing is changed then).

    Examples
    --------
    >>> import torch
    >>> from sklearn_rnn.optim import clipped_step_
    >>> w = torch.zeros(2)
    >>> clipped_step_([w], [torch.tensor([-3.0, -4.0])], lr=0.1, clip_threshold=1.0)
    0.02
    >>> w
    tensor([-0.0600, -0.0800])
    """
    _check_step_settings({"lr": lr, "clip_threshold": clip_threshold})
    params = list(params)
    if len(params) != len(direction):
        raise ValueError(
            f"params and direction must pair up; got {len(params)} parameters and "
            f"{len(direction)} direction blocks."
        )
    for index, (parameter, block) in enumerate(zip(params, direction)):
        if tuple(block.shape) != tuple(parameter.shape):  # broadcast: a step longer than mu * tau
            raise ValueError(
                f"direction block {index} has shape {tuple(block.shape)}, but its parameter "
                f"{tuple(parameter.shape)}: each block must have its parameter's shape."
            )
    try:
        given = None if direction_norm is None else float(direction_norm)
    except (TypeError, ValueError):
        given = math.nan
    if given is not None and not given >= 0:  # negative or NaN: clipping off
        raise ValueError(
            f"direction_norm must be a non-negative number (||d|| of the whole direction) or None "
            f"to compute it; got {direction_norm!r}."
        )
    norm = _norm(direction) if direction_norm is None else direction_norm
    if not math.isfinite(float(norm)):  # NaN or inf in d: the step would write them into theta
        raise ValueError(
            f"the direction's norm is {float(norm)}: the direction holds values that are not "
            "finite (or too large for its dtype), and stepping along it would make the "
            "parameters non-finite; nothing was changed. Skip this step (the optimizers do)."
        )
    with torch.no_grad():
        return _clipped_update_(params, direction, norm, lr=lr, clip_threshold=clip_threshold)


def _clipped_update_(
    params: Sequence[torch.Tensor],
    blocks: Sequence[torch.Tensor],
    norm: float,
    *,
    lr: float,
    clip_threshold: float | None,
    sign: float = 1.0,
) -> float:
    """``theta <- theta + sign * alpha * block``, with ``alpha`` of eq. 3.6 for ``norm``.

    ``sign=-1`` steps along the anti-gradient of gradient ``blocks`` without building
    it (:class:`ClippedSGD`). Call under ``torch.no_grad()``.
    """
    alpha = _step_size(norm, lr, clip_threshold)
    for p, d in zip(params, blocks):
        # A same-type .to() costs a dispatch per parameter (10 us for five on a CPU).
        p.add_(d if d.dtype == p.dtype else d.to(p.dtype), alpha=sign * alpha)
    return alpha


class _StepRuleOptimizer(torch.optim.Optimizer):
    """An optimizer of the clipped step rule (eq. 3.6): every group's ``lr`` and
    ``clip_threshold`` are checked, those of the constructor and of added groups."""

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        """Add a group of parameters, its ``lr`` and ``clip_threshold`` checked.

        Parameters
        ----------
        param_group : dict
        """
        params = param_group.get("params")
        if params is not None and not isinstance(params, (torch.Tensor, list, tuple)):
            # module.parameters(), a generator: a list, so that the checks see the parameters
            param_group = {**param_group, "params": list(params)}
        _check_step_settings(param_group)
        _check_lr_fits(param_group.get("lr", self.defaults.get("lr")), param_group.get("params"))
        super().add_param_group(param_group)

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore a state, every group's ``lr`` and ``clip_threshold`` checked first, as
        the constructor checks them (a hand-edited or another optimizer's state loaded
        without a word: a negative rate climbed the loss, NaN wrote NaN weights).

        Parameters
        ----------
        state_dict : dict
        """
        name = type(self).__name__
        for index, group in enumerate(state_dict.get("param_groups", ())):
            if "clip_threshold" not in group:
                raise ValueError(
                    f"state_dict's param_groups[{index}] has no clip_threshold: it is not the "
                    f"state of a {name} (another optimizer's, such as torch.optim.SGD's?). Load a "
                    f"state saved by {name}.state_dict()."
                )
            try:
                _check_step_settings(group, saved=True)
                if index < len(self.param_groups):  # the parameters the saved group's lr will step
                    _check_lr_fits(group.get("lr"), self.param_groups[index]["params"])
            except ValueError as error:
                raise ValueError(f"state_dict's param_groups[{index}]: {error}") from error
        super().load_state_dict(state_dict)


def _check_lr_fits(lr: Any, params: Any) -> None:
    """Refuse an ``lr`` beyond the range of the parameters' dtype (1e300 on float32): the
    step failed in PyTorch's ``add_`` after earlier groups had moved."""
    blocks = [params] if isinstance(params, torch.Tensor) else params if isinstance(params, (list, tuple)) else []
    for parameter in blocks:
        if isinstance(parameter, torch.Tensor) and parameter.is_floating_point():
            largest = torch.finfo(parameter.dtype).max
            if lr is not None and float(lr) > largest:
                raise ValueError(
                    f"lr={float(lr)!r} is beyond the range of the parameters' dtype {parameter.dtype} "
                    f"(at most {largest:.3g}): no step could be taken in it. Pass the step length "
                    "mu as a moderate positive float, such as 0.01."
                )


def _check_step_settings(group: dict[str, Any], *, saved: bool = False) -> None:
    """Refuse a parameter group's non-positive ``lr`` or ``clip_threshold`` (None: no
    clipping), for the constructors and ``add_param_group`` alike; a ``saved`` state's
    ``lr`` may be 0, where a learning-rate schedule put it (a warm-up from 0, a decay to
    0), as ``torch.optim.SGD`` loads it."""
    if saved:
        _check_number("lr", group.get("lr", 1.0), "a non-negative number (a schedule may set 0)", zero=True,
                      fix="The state was edited or comes from another optimizer: load one saved by state_dict().")
    else:
        _check_number(
            "lr", group.get("lr", 1.0), "positive",
            fix="Pass the step length mu as a positive float (a 0-d tensor also works).",
        )
    if not math.isfinite(float(group.get("lr", 1.0))):  # one step would make every weight infinite
        raise ValueError(
            f"lr must be finite; got {group['lr']!r}. Pass the step length mu as a positive float, "
            "such as 0.01 (clip_threshold=None, not lr, lifts the bound on the step)."
        )
    clip_threshold = group.get("clip_threshold")
    if clip_threshold is not None:
        _check_number(
            "clip_threshold",
            clip_threshold,
            "positive or None (never clip)",
            fix="Pass tau as a positive float (a 0-d tensor also works), or None.",
        )


_EPS_FIX = "Pass the smallest step norm to normalize as a float, such as 1e-8."


def _check_switch_threshold(switch_threshold: Any) -> None:
    """Refuse a ``switch_threshold`` (``psi``) that is not None nor a non-negative number."""
    if switch_threshold is not None:
        _check_number(
            "switch_threshold",
            switch_threshold,
            "a non-negative float or None (never switch)",
            fix="Pass psi as a float, such as 0.9, or None.",
            zero=True,
        )


def _check_eps(eps: Any) -> None:
    """Refuse an ``eps`` (the smallest step norm normalized) that is not a non-negative number."""
    _check_number("eps", eps, "non-negative", fix=_EPS_FIX, zero=True)


def _check_direction_settings(switch_threshold: Any, weights: Any, eps: Any) -> None:
    """Refuse a bad ``switch_threshold``, ``weights`` rule or ``eps``, from the functions,
    the optimizer's constructor or a loaded state dict alike."""
    _check_switch_threshold(switch_threshold)
    if weights not in WEIGHT_RULES:
        raise ValueError(f"weights must be one of {list(WEIGHT_RULES)}; got {weights!r}.")
    _check_eps(eps)


def _check_number(name: str, value: Any, expected: str, *, fix: str, zero: bool = False) -> None:
    """Refuse ``value`` of the parameter ``name`` unless it is a real number (a 0-d real
    tensor too; not a bool, nor a string) that is positive, or non-negative with ``zero``
    (NaN is neither): a ValueError that says what was ``expected``, what came and ``fix``."""
    number = isinstance(value, Real) and not isinstance(value, bool)
    tensor = (
        isinstance(value, torch.Tensor) and value.ndim == 0 and value.dtype != torch.bool and not value.is_complex()
    )
    if (number or tensor) and bool(value >= 0 if zero else value > 0):
        return
    kind = ""
    if isinstance(value, torch.Tensor):
        kind = f" (a tensor of shape {tuple(value.shape)} and dtype {value.dtype})"
    elif not number:
        kind = f" (of type {type(value).__name__})"
    raise ValueError(f"{name} must be {expected}; got {value!r}{kind}. {fix}")


def _norm(blocks: Sequence[torch.Tensor]) -> float:
    """Euclidean norm of the concatenation of ``blocks`` (sparse ones too), as a Python
    float (computed in the blocks' dtype, at least float32).

    Infinite only when an entry is, or when the norm exceeds the float64 range: where the
    squares of finite entries overflow, the norm is recomputed in float64 on the blocks
    divided by their largest magnitude. NaN when an entry is NaN.
    """
    if not blocks:
        return 0.0
    # A sparse gradient (an embedding's, sparse=True): the norm of its coalesced values.
    blocks = [b.coalesce().values() if b.is_sparse else b for b in blocks]
    norm = float(torch.linalg.vector_norm(torch.stack([_vector_norm(b) for b in blocks])))
    if not math.isinf(norm):
        return norm
    largest = float(torch.stack([b.abs().amax() for b in blocks if b.numel()]).amax())  # inf or NaN: as is
    if not math.isfinite(largest):
        return largest
    # In complex128 for complex blocks: .double() dropped the imaginary part, and a purely
    # imaginary gradient went unclipped.
    scaled = [torch.linalg.vector_norm(b.to(torch.complex128 if b.is_complex() else torch.float64) / largest)
              for b in blocks]
    return largest * float(torch.linalg.vector_norm(torch.stack(scaled)))


def _vector_norm(block: torch.Tensor) -> torch.Tensor:
    """The Euclidean norm of ``block``, in its dtype, at least float32."""
    work = _working_dtype(block.dtype)
    return torch.linalg.vector_norm(block) if block.dtype == work else torch.linalg.vector_norm(block, dtype=work)


def _working_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype of squares, norms, normalization factors and convex weights for
    parameters of ``dtype``: ``dtype``, at least float32.

    In float16 the square of any value below about 2.4e-4 is zero (a small step's norm
    would vanish, and the step be left unnormalized), and ``1 / norm`` of a step whose
    norm is below about 1.5e-5 overflows; float32 and float64 are kept as they are.
    """
    return torch.promote_types(dtype, torch.float32)


def _check_gradient_blocks(gradient: Sequence[torch.Tensor], temporal: Sequence[torch.Tensor]) -> None:
    """Refuse a full gradient whose blocks are not those of ``temporal`` without the
    step axis, one per block in the same order."""
    shapes = [tuple(block.shape) for block in gradient]
    expected = [tuple(block.shape[1:]) for block in temporal]
    if shapes != expected:
        raise ValueError(
            f"gradient must hold one block per temporal-gradient block, shaped as it is "
            f"without its steps axis: expected shapes {expected}; got {shapes}. Pass the "
            "gradients of the same parameters in the same order, or gradient=None for the "
            "sum over steps."
        )


def _check_steps(temporal: Sequence[torch.Tensor]) -> None:
    if len(temporal) == 0:
        raise ValueError("temporal gradients must hold at least one block; got none.")
    steps = {block.shape[0] if block.ndim else None for block in temporal}
    if len(steps) != 1 or None in steps:
        raise ValueError(
            "every temporal-gradient block must have the steps as its first axis, the same "
            f"for all blocks; got shapes {[tuple(b.shape) for b in temporal]}."
        )
    kinds = {block.dtype for block in temporal if not block.is_floating_point()}
    if kinds:  # an integer direction came back truncated, its norm not the gradient's
        raise ValueError(
            f"temporal-gradient blocks must be floating point (gradients); got dtype "
            f"{sorted(map(str, kinds))[0]}. Pass them as floats, e.g. block.float()."
        )
