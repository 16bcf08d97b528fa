"""The optimizer of the thesis: simplex direction, conditional switching, clipped step."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from numbers import Integral
from typing import Any

import numpy as np
import torch

from ._functional import (
    BRANCHES,
    NORM_EPS,
    WEIGHT_RULES,
    WeightRule,
    _check_direction_settings,
    _check_number,
    _check_step_settings,
    _clipped_update_,
    _simplex_rule,
    _StepRuleOptimizer,
)
from ..nn import RecurrentNetwork
from ._temporal import TemporalGradients

__all__ = ["SimplexSGD"]


def _saved_simplex_entry(extra: Any) -> tuple[torch.Tensor, dict[str, int]]:
    """The random generator's state (on the CPU, as a generator takes it: a checkpoint
    loaded with ``torch.load(..., map_location='cuda')`` moved it, and "RNG state must be
    a torch.ByteTensor" came after the groups had loaded) and the branch counts of a
    saved state's ``'simplex'`` entry, checked."""
    fix = "Load a state saved by SimplexSGD.state_dict()."
    if not isinstance(extra, dict) or "generator_state" not in extra or "branch_counts" not in extra:
        raise ValueError(
            "state_dict's 'simplex' entry must hold generator_state and branch_counts; got "
            f"{sorted(extra) if isinstance(extra, dict) else type(extra).__name__}. {fix}"
        )
    generator_state = extra["generator_state"]
    if not isinstance(generator_state, torch.Tensor) or generator_state.ndim != 1:
        raise ValueError(f"state_dict's simplex generator_state must be a 1-D tensor of bytes. {fix}")
    counts = extra["branch_counts"]
    if not (isinstance(counts, dict) and set(counts) <= set(BRANCHES)
            and all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in counts.values())):
        raise ValueError(
            f"state_dict's simplex branch_counts must count steps of the branches {list(BRANCHES)} "
            f"(non-negative ints); got {counts!r}. {fix}"
        )
    generator_state = generator_state.to(device="cpu", dtype=torch.uint8)
    try:  # on a scratch generator: a wrong size failed after the groups had loaded
        torch.Generator().set_state(generator_state)
    except RuntimeError:
        expected = torch.Generator().get_state().numel()
        raise ValueError(
            f"state_dict's simplex generator_state is not a CPU generator's state ({generator_state.numel()} "
            f"bytes, expected {expected}). {fix}"
        ) from None
    return generator_state, dict.fromkeys(BRANCHES, 0) | counts


def _plain_number(value: Any) -> Any:
    """A numpy real as a Python float; anything else as it is."""
    return float(value) if isinstance(value, np.generic) else value


class SimplexSGD(_StepRuleOptimizer):
    """Stochastic descent along the simplex direction of temporal gradients (algorithm 3.2).

    Each step takes the temporal gradients of the batch (:func:`temporal_gradients`),
    normalizes every step's gradient to unit norm (eq. 3.3), combines them with fresh
    random convex weights (eq. 3.4), gives the result the norm of the full gradient
    and negates it (eq. 3.5). The anti-gradient is used instead when that candidate is
    not a descent direction (``'descent_fallback'``) or when the gradient norm exceeds
    ``switch_threshold`` (``'switched'``: the gradient is not vanishing, so it is
    followed). The step length is the clipping rule of eq. 3.6, ``mu`` or
    ``mu * tau / ||d||``. A non-finite gradient skips the step (``'skipped'``).

    Normalizing gives distant steps, whose gradients vanish, as much say as recent
    ones; that is what lets the direction carry information over long spans while the
    plain gradient only sees the last few steps.

    ``step`` needs the temporal gradients: ``opt.step(temporal_gradients(...))``, or a
    closure that returns them. A bare ``step()`` raises an error rather than silently
    stepping along the anti-gradient; use :class:`ClippedSGD` for that.

    Parameters
    ----------
    params : iterable of torch.Tensor or dict
        The trainable parameters of a :class:`~sklearn_rnn.nn.RecurrentNetwork`, or of
        the PyTorch recurrent module and readout a :class:`RecurrentAdapter` wraps
        (frozen ones are ignored), possibly in groups with their own ``lr`` and
        ``clip_threshold``. They must be exactly those the temporal gradients cover.
    lr : float, default=0.01
        ``mu``, the step length when the direction's norm is at most ``tau``.
    clip_threshold : float or None, default=1.0
        ``tau``; None never clips.
    switch_threshold : float or None, default=None
        ``psi``: use the anti-gradient when the gradient norm exceeds it; None never
        switches. The thesis tuned it per task (0.5 for addition, 0.9 for temporal
        order, with ``tau = 1``).
    weights : {'exp', 'dirichlet', 'uniform'}, default='exp'
        Rule for the random convex weights (see :func:`convex_weights`); ``'exp'`` is
        the thesis' original.
    generator : torch.Generator or int, optional
        Source of the random weights; an int (a numpy integer too) seeds a new local
        generator, None draws a non-deterministic seed. The global generator is never
        used.
    eps : float, default=1e-8
        Steps whose gradient norm is below it are left unnormalized.

    Attributes
    ----------
    branch_counts : dict of str to int
        How many steps took each branch (``'simplex'``, ``'descent_fallback'``,
        ``'switched'``, ``'skipped'``).
    last_step : dict
        ``branch``, ``gradient_norm``, ``cosine`` (of the direction with the gradient)
        and ``step_size`` of the latest step, for logging. ``step_size`` is a float
        (NaN for a skipped step), or with several parameter groups a list of one per
        group, in the order of ``param_groups`` (each group's ``lr`` and
        ``clip_threshold`` give its own).

    See Also
    --------
    temporal_gradients : What ``step`` consumes.
    ClippedSGD : The clipped anti-gradient alone.

    Examples
    --------
    Learn to recall the first value of sequences of 2 to 8 steps, in plain PyTorch:

    >>> import torch
    >>> import torch.nn.functional as F
    >>> from sklearn_rnn.nn import RecurrentNetwork
    >>> from sklearn_rnn.optim import SimplexSGD, temporal_gradients
    >>> gen = torch.Generator().manual_seed(0)
    >>> net = RecurrentNetwork(1, 16, 1, generator=gen)
    >>> opt = SimplexSGD(net.parameters(), lr=0.05, clip_threshold=1.0,
    ...                  switch_threshold=1.0, generator=0)
    >>> def batch(size=64):
    ...     lengths = torch.randint(2, 9, (size,), generator=gen)
    ...     x = torch.randn(size, 8, 1, generator=gen)
    ...     return x, lengths, x[:, 0]
    >>> for _ in range(300):
    ...     x, lengths, y = batch()
    ...     opt.zero_grad()
    ...     states = net.forward_states(x, lengths)
    ...     loss = F.mse_loss(states.outputs, y)
    ...     opt.step(temporal_gradients(net, states, loss, lengths))
    >>> x, lengths, y = batch(1000)
    >>> with torch.no_grad():
    ...     F.mse_loss(net(x, lengths), y).item() < 0.25  # predicting 0 scores 1.0
    True
    >>> sum(opt.branch_counts.values()), opt.branch_counts["simplex"] > 0
    (300, True)
    """

    def __init__(
        self,
        params: Iterable[torch.Tensor] | Iterable[dict[str, Any]],
        lr: float = 0.01,
        clip_threshold: float | None = 1.0,
        switch_threshold: float | None = None,
        weights: WeightRule = "exp",
        generator: torch.Generator | int | None = None,
        eps: float = NORM_EPS,
    ) -> None:
        _check_step_settings({"lr": lr, "clip_threshold": clip_threshold})
        _check_direction_settings(switch_threshold, weights, eps)
        super().__init__(params, {"lr": lr, "clip_threshold": clip_threshold})
        # numpy scalars as Python floats: a state_dict holding them is refused by
        # torch.load's default weights_only=True (tensors stay as they are).
        self.switch_threshold = _plain_number(switch_threshold)
        self.weights = str(weights)  # a numpy string (a grid's) is refused by torch.load's weights_only
        self.eps = _plain_number(eps)
        self.generator = _as_generator(generator)
        self.branch_counts: dict[str, int] = dict.fromkeys(BRANCHES, 0)
        self.last_step: dict[str, Any] = {}

    @torch.no_grad()
    def step(  # type: ignore[override]
        self,
        temporal: TemporalGradients | Callable[[], TemporalGradients] | None = None,
        *,
        closure: Callable[[], TemporalGradients] | None = None,
    ) -> torch.Tensor | None:
        """Take one step along the simplex direction (or the anti-gradient).

        Parameters
        ----------
        temporal : TemporalGradients or callable
            The batch's temporal gradients, or a closure that clears the gradients,
            recomputes the model and returns them.
        closure : callable, optional
            That closure by PyTorch's keyword (``optimizer.step(closure=...)``, as
            training frameworks call it), in place of ``temporal``.

        Returns
        -------
        torch.Tensor or None
            The loss, when a closure was given.
        """
        if closure is not None:
            if temporal is not None:
                raise TypeError("SimplexSGD.step takes the temporal gradients or closure=..., not both.")
            temporal = closure
        from_closure = callable(temporal) and not isinstance(temporal, TemporalGradients)
        if from_closure:
            with torch.enable_grad():
                temporal = temporal()  # type: ignore[operator]
        if not isinstance(temporal, TemporalGradients):
            raise TypeError(
                "SimplexSGD.step needs the temporal gradients of the batch: "
                "`opt.step(temporal_gradients(net, states, loss, lengths))`, or a closure "
                f"returning them; got {type(temporal).__name__}. For plain clipped "
                "anti-gradient steps use ClippedSGD."
            )
        self._check_parameters(temporal)
        reference = temporal.gradient[0]
        chosen = _simplex_rule(
            temporal.gradient,
            temporal.steps,
            lambda rescue: temporal._step_norms(rescue=rescue),
            temporal.combine,
            dtype=reference.dtype,
            weights=self.weights,
            generator=self.generator,
            switch_threshold=self.switch_threshold,
            eps=self.eps,
        )
        self.branch_counts[chosen.branch] += 1
        step_sizes = [math.nan] * len(self.param_groups)
        if chosen.direction is not None:
            by_param = {id(p): d for p, d in zip(temporal.parameters, chosen.direction)}
            for index, group in enumerate(self.param_groups):
                params = [p for p in group["params"] if id(p) in by_param]
                step_sizes[index] = _clipped_update_(  # settings checked as they were set
                    params,
                    [by_param[id(p)] for p in params],
                    chosen.gradient_norm,  # d has the gradient's norm in every branch (eq. 3.5)
                    lr=group["lr"],
                    clip_threshold=group["clip_threshold"],
                )
        self.last_step = {
            "branch": chosen.branch,
            "gradient_norm": chosen.gradient_norm,
            "cosine": chosen.cosine,
            # One group: a float, as always; several: each group's own step.
            "step_size": step_sizes[0] if len(step_sizes) == 1 else step_sizes,
        }
        return temporal.loss if from_closure else None

    def state_dict(self) -> dict[str, Any]:
        """The optimizer's state, with the random generator's state, the branch counts and
        the direction's settings (``switch_threshold``, ``weights``, ``eps``).

        Returns
        -------
        dict
        """
        state = super().state_dict()
        state["simplex"] = {
            "generator_state": self.generator.get_state(),
            "branch_counts": dict(self.branch_counts),
            **self._direction_settings(),  # lr and clip_threshold travel in param_groups
        }
        return state

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore a state from :meth:`state_dict`: random generator, branch counts and the
        direction's settings (``switch_threshold``, ``weights``, ``eps``) included.

        Parameters
        ----------
        state_dict : dict
        """
        state_dict = dict(state_dict)
        extra = state_dict.pop("simplex", None)
        current = self._direction_settings()
        settings = {key: extra[key] for key in current if key in extra} if extra else {}
        # Everything checked and read before anything changes (a bad entry left the
        # groups loaded and the generator replaced).
        _check_direction_settings(**(current | settings))
        if extra is not None:
            generator_state, counts = _saved_simplex_entry(extra)
        super().load_state_dict(state_dict)
        if extra is not None:
            self.generator.set_state(generator_state)
            self.branch_counts = counts
            for key, value in settings.items():  # absent from a state saved before they were kept
                setattr(self, key, str(value) if key == "weights" else _plain_number(value))

    def __getstate__(self) -> dict[str, Any]:
        """What pickle, joblib and deepcopy keep: PyTorch's optimizer state, plus this
        optimizer's settings, branch counts and random generator (as its state)."""
        state = super().__getstate__()
        state.update(
            **self._direction_settings(),
            branch_counts=dict(self.branch_counts),
            last_step=dict(self.last_step),
            generator_state=self.generator.get_state(),
        )
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`__getstate__` kept (unpickling, deepcopy), or the state and
        groups of :meth:`load_state_dict`, which PyTorch passes here too.

        A generator is made only when there is none (unpickling); an optimizer loading a
        state dict keeps its own, whose state only the ``'simplex'`` entry restores.

        Parameters
        ----------
        state : dict
        """
        state = dict(state)
        generator_state = state.pop("generator_state", None)
        super().__setstate__(state)
        if getattr(self, "generator", None) is None:
            self.generator = torch.Generator()
        if generator_state is not None:
            self.generator.set_state(generator_state)

    def _direction_settings(self) -> dict[str, Any]:
        """``switch_threshold``, ``weights`` and ``eps``: what the state dict and pickle keep
        of the direction's settings (``lr`` and ``clip_threshold`` are the groups')."""
        return {"switch_threshold": self.switch_threshold, "weights": self.weights, "eps": self.eps}

    def _check_parameters(self, temporal: TemporalGradients) -> None:
        mine = {id(p): p for group in self.param_groups for p in group["params"] if p.requires_grad}
        covered = {id(p) for p in temporal.parameters}
        if mine.keys() != covered:
            raise ValueError(
                f"SimplexSGD holds {len(mine)} trainable parameters and the temporal gradients "
                f"cover {len(covered)} ({', '.join(temporal.names)}), "
                f"{len(mine.keys() & covered)} in common; they must be the same. "
                + _mismatch(temporal, [p for key, p in mine.items() if key not in covered], mine.keys())
            )


def _mismatch(temporal: TemporalGradients, uncovered: list[torch.Tensor], mine: Iterable[int]) -> str:
    """What differs between the optimizer's trainable parameters and those the temporal
    gradients cover, by name, and how to fix it: the sentences after "they must be the
    same" in :meth:`SimplexSGD.step`'s error."""
    network = temporal._network
    names = {} if network is None else {id(p): name for name, p in network.named_parameters()}
    fixed = set()
    if isinstance(network, RecurrentNetwork):
        for cell, _, recurrence in network.stack() + network.reverse_stack():
            fixed.update(id(p) for p in cell.frozen_parameters(recurrence))
    frozen = [names[id(p)] for p in uncovered if id(p) in fixed]
    others = [names.get(id(p), f"a tensor of shape {tuple(p.shape)} that is not the network's")
              for p in uncovered if id(p) not in fixed]
    mine = set(mine)
    missing = [name for name, p in zip(temporal.names, temporal.parameters) if id(p) not in mine]
    sentences = []
    if frozen:
        sentences.append(
            f"The optimizer trains {', '.join(frozen)}: the fused recurrence modules' fixed "
            "input weights (an identity, and a zero input bias), which the network's input "
            "projection replaces and which must stay frozen (requires_grad=False). To "
            "unfreeze the network, call network.requires_grad_(True), which keeps them "
            "frozen, rather than setting p.requires_grad = True on every parameter."
        )
    if others:
        sentences.append(f"Not covered by the temporal gradients: {', '.join(others)}.")
    if missing:
        sentences.append(f"Not trained by the optimizer: {', '.join(missing)}.")
    if others or missing:
        sentences.append(
            "Build the optimizer with network.parameters() of the network given to "
            "temporal_gradients."
        )
    return " ".join(sentences)


def _as_generator(generator: torch.Generator | int | None) -> torch.Generator:
    if isinstance(generator, torch.Generator):
        if generator.device.type != "cpu":
            raise ValueError(
                f"generator must be a CPU torch.Generator (weights are drawn on the CPU); got "
                f"one on {generator.device}."
            )
        return generator
    local = torch.Generator()
    if generator is None:
        local.seed()  # a non-deterministic seed, for this generator only
        return local
    if isinstance(generator, bool) or not isinstance(generator, Integral):
        raise TypeError(
            f"generator must be a torch.Generator, an int seed or None; got {generator!r} of type "
            f"{type(generator).__name__}. Pass an int, such as 0, for reproducible weights."
        )
    if not -(2**63) <= int(generator) < 2**64:  # manual_seed's range: "Overflow when unpacking long long"
        raise ValueError(f"generator, an int seed, must be in [-2**63, 2**64); got {generator!r}.")
    return local.manual_seed(int(generator))
