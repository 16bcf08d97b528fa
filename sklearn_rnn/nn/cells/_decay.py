"""A time-aware recurrence: the hidden state and stale inputs decay with the time gap.

The visits of a patient can be a month or years apart; a plain recurrence treats every
step alike. Here each hidden unit is a continuous-time Elman unit that relaxes towards
its target ``tanh(u_t + W_rec h_{t-1})`` at its own learned rate ``r``: over a gap
``delta_t`` it moves the fraction ``1 - exp(-r * delta_t)`` of the way (the exact
solution of ``dh/dt = r (target - h)`` with the target held over the gap). A unit with a
slow rate keeps what it saw years ago, such as a patient's state at the first visit; a
fast one follows the latest visit; a long gap lets every unit move further. Inputs that
were not measured at a step (carried forward from an earlier one) decay from their last
observed value towards a learned baseline the longer ago that observation was, as in
GRU-D (Che et al., "Recurrent neural networks for multivariate time series with missing
values", Scientific Reports 8, 2018).

Why not GRU-D's hidden decay, which shrinks the state towards zero over a gap before an
ordinary update? On the PBC visit histories (:mod:`sklearn_rnn.clinical`) an Elman
recurrence with that decay lost the early visits and scored no better than the plain
``tanh`` cell, while the relaxation form, whose slow units integrate the history, did
(see ``examples/plot_clinical_pbcseq.py``).
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F

from ._base import Cell, LayerStates, _is_int, autocast_casts, register_cell, reset_affine_, uniform_
from ._stepwise import functorch_transforms_active

__all__ = ["DecayCell", "DecayRecurrence"]

#: Rates of the hidden units at initialization, per unit of gap (the encoder's time
#: unit is the median training gap): spread log-uniformly so that some units follow
#: each new step closely and others keep their state over many gaps.
HIDDEN_RATES = (0.01, 3.0)
#: Decay rate of stale inputs at initialization, per unit of gap.
INPUT_RATE = 0.1


class DecayRecurrence(nn.Module):
    """Continuous-time Elman ``tanh`` recurrence: the state relaxes over the gap between steps.

    For step ``t`` with gap ``delta_t`` since the previous step,
    ``h_t = gamma_t * h_{t-1} + (1 - gamma_t) * tanh(u_t + W_rec h_{t-1})`` with
    ``h_0 = 0``, ``gamma_t = exp(-softplus(rho_h) * delta_t)`` per hidden unit, and
    ``gamma_1 = 0`` (the first step sets the state), where ``u_t`` is the (already
    projected) input. A step at the same time as the previous one (``delta_t = 0``)
    leaves the state unchanged: a continuous-time state does not move in no time, so
    merge such steps, or give them distinct times, before fitting.
    :meth:`decay_inputs` prepares the inputs: a value
    channel whose mask says "not observed at this step" holds the last observation;
    it becomes ``gamma_x * value + (1 - gamma_x) * baseline`` with
    ``gamma_x = exp(-softplus(rho_x) * elapsed)``, ``elapsed`` being the time since
    that feature was last observed, and ``baseline`` a learned value per feature
    (initialized at 0, the training mean of standardized inputs).

    Parameters
    ----------
    hidden_size : int
        Recurrent units.
    n_masked : int, default=0
        Value channels that have a mask channel: the inputs are laid out as
        ``[values (n_masked first ones masked), masks (n_masked), ...]``, as
        :class:`~sklearn_rnn.sequences.InputEncoder` writes them.
    device, dtype : optional
        Where and how the parameters are created.

    Attributes
    ----------
    weight_hh : torch.nn.Parameter of shape (hidden_size, hidden_size)
        The recurrent matrix ``W_rec``.
    hidden_decay : torch.nn.Parameter of shape (hidden_size,)
        ``rho_h``: the relaxation rate of each unit is ``softplus(rho_h)``, per unit of
        gap.
    input_decay : torch.nn.Parameter of shape (n_masked,)
        ``rho_x``: the decay rate of each masked input.
    input_baseline : torch.nn.Parameter of shape (n_masked,)
        Where stale inputs decay to.

    Examples
    --------
    >>> import torch
    >>> from sklearn_rnn.nn import DecayRecurrence
    >>> cell = DecayRecurrence(4)
    >>> projected = torch.randn(2, 3, 4)       # (batch, steps, hidden): inputs already projected
    >>> gaps = torch.tensor([[0.0, 1.0, 5.0], [0.0, 0.5, 0.5]])
    >>> cell(projected, gaps).shape
    torch.Size([2, 3, 4])
    """

    def __init__(
        self,
        hidden_size: int,
        *,
        n_masked: int = 0,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        if not (_is_int(hidden_size) and hidden_size >= 1) or not (_is_int(n_masked) and n_masked >= 0):
            raise ValueError(
                "DecayRecurrence needs hidden_size, a positive int, and n_masked, an int of "
                f"at least 0 (the masked input values it decays); got hidden_size="
                f"{hidden_size!r}, n_masked={n_masked!r}."
            )
        hidden_size, n_masked = int(hidden_size), int(n_masked)
        factory = {"device": device, "dtype": dtype}
        self.hidden_size = hidden_size
        self.n_masked = n_masked
        self.weight_hh = nn.Parameter(torch.empty(hidden_size, hidden_size, **factory))
        self.hidden_decay = nn.Parameter(torch.empty(hidden_size, **factory))
        self.input_decay = nn.Parameter(torch.empty(n_masked, **factory))
        self.input_baseline = nn.Parameter(torch.empty(n_masked, **factory))
        if torch.device(device or "cpu").type != "meta":
            self.reset_parameters()

    def reset_parameters(self, generator: torch.Generator | None = None) -> None:
        """Draw ``W_rec`` uniformly in ``±1/sqrt(hidden_size)`` and set the decays.

        The decay parameters are set by :meth:`reset_decays`.
        :class:`~sklearn_rnn.nn.RecurrentNetwork` initializes it through
        :meth:`DecayCell.reset_parameters`: :meth:`reset_decays`, then ``W_rec`` as for
        the Elman cell (spectral or uniform).

        Parameters
        ----------
        generator : torch.Generator, optional
            Source of randomness for ``W_rec``.
        """
        with torch.no_grad():
            uniform_(self.weight_hh, 1 / math.sqrt(self.hidden_size), generator)
        self.reset_decays()

    def reset_decays(self) -> None:
        """Set the decay parameters: hidden rates log-spaced over ``HIDDEN_RATES``,
        input rates ``INPUT_RATE``, baselines 0 (no randomness)."""
        with torch.no_grad():
            low, high = (math.log(rate) for rate in HIDDEN_RATES)
            rates = torch.exp(torch.linspace(low, high, self.hidden_size, dtype=torch.float64, device="cpu"))
            self.hidden_decay.copy_(_inverse_softplus(rates))
            self.input_decay.fill_(_inverse_softplus(torch.tensor(INPUT_RATE, device="cpu")).item())
            self.input_baseline.zero_()

    def decay_inputs(self, x: torch.Tensor, gaps: torch.Tensor) -> torch.Tensor:
        """Pull carried-forward (unobserved) values towards their baseline.

        Parameters
        ----------
        x : torch.Tensor of shape (batch, steps, input_size)
            Encoded inputs: values, masks, then any other channels.
        gaps : torch.Tensor of shape (batch, steps)
            Time since the previous step (0 at the first step and at padding).

        Returns
        -------
        torch.Tensor of shape (batch, steps, input_size)
            ``x`` with its first ``n_masked`` channels decayed where unobserved.
        """
        if not isinstance(x, torch.Tensor) or x.ndim != 3 or x.shape[-1] < 2 * self.n_masked:
            shape = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
            raise ValueError(
                f"decay_inputs: x must be a tensor of shape (batch, steps, channels) holding the "
                f"{self.n_masked} masked values, then their {self.n_masked} masks, then any other "
                f"channels (at least {2 * self.n_masked}); got {shape}."
            )
        gaps = _checked_gaps(gaps, x, "decay_inputs")
        m = self.n_masked
        if m == 0:
            return x
        _check_dtype(x, self.input_decay, "decay_inputs: x")  # promoted silently before
        values, masks = x[..., :m], x[..., m : 2 * m]  # (B, T, m) each
        # Time since each feature was last observed: grows by the gap, resets after an
        # observation (GRU-D's delta). Parameter-free, so a short loop over steps. Held
        # below the dtype's largest value: a sum of finite gaps may overflow, and an
        # infinite time gave input_decay a NaN gradient (inf * 0).
        largest = torch.finfo(x.dtype).max if x.is_floating_point() else math.inf
        since = [torch.zeros_like(values[:, 0])]  # (B, m)
        steps_gaps, steps_masks = gaps[..., None].unbind(1), masks.unbind(1)  # (B, 1), (B, m) each
        for t in range(1, x.shape[1]):
            since.append((steps_gaps[t] + (1 - steps_masks[t - 1]) * since[-1]).clamp(max=largest))
        elapsed = torch.stack(since, dim=1)  # (B, T, m)
        gamma = torch.exp(-F.softplus(self.input_decay) * elapsed)  # (B, T, m)
        stale = gamma * values + (1 - gamma) * self.input_baseline  # (B, T, m)
        decayed = masks * values + (1 - masks) * stale
        return torch.cat([decayed, x[..., m:]], dim=-1)

    def forward(self, projected: torch.Tensor, gaps: torch.Tensor) -> torch.Tensor:
        """Run the recurrence over projected inputs.

        Parameters
        ----------
        projected : torch.Tensor of shape (batch, steps, hidden_size)
            ``u_t = W_in x_t + b`` of every step.
        gaps : torch.Tensor of shape (batch, steps)
            Time since the previous step, unit-free and non-negative (the first step's
            is not read), in any real dtype: they are read in ``projected``'s.

        Returns
        -------
        torch.Tensor of shape (batch, steps, hidden_size)
            The hidden states ``h_t``; a padded step (gap 0) repeats the state before it.

        Raises
        ------
        ValueError
            ``gaps`` of another shape, or (checked on a CPU) a negative or NaN gap
            after the first step, which would turn the decay into a growth without bound.
        """
        if not isinstance(projected, torch.Tensor) or projected.ndim != 3 or projected.shape[-1] != self.hidden_size:
            shape = tuple(projected.shape) if isinstance(projected, torch.Tensor) else type(projected).__name__
            raise ValueError(
                f"DecayRecurrence: projected must be a tensor of shape (batch, steps, "
                f"{self.hidden_size}), the projected inputs of every step; got {shape} (a "
                "(batch, steps) input mixed the sequences; add the feature axis)."
            )
        _check_dtype(projected, self.weight_hh, "DecayRecurrence: projected")
        gaps = _checked_gaps(gaps, projected, "DecayRecurrence")
        keep = torch.exp(-F.softplus(self.hidden_decay) * gaps[..., None])  # (B, T, H)
        keep = torch.cat([torch.zeros_like(keep[:, :1]), keep[:, 1:]], dim=1)  # gamma_1 = 0
        state = projected.new_zeros(projected.shape[0], self.hidden_size)  # (B, H); h_0 = 0
        move = 1 - keep  # (B, T, H)
        # Steps taken apart once (unbind) rather than indexed per step: the backward pass
        # of an index writes a zero tensor the size of the whole sequence for every step,
        # which cost more than the recurrence itself.
        inputs, keeps, moves = projected.unbind(1), keep.unbind(1), move.unbind(1)
        states = []
        for t in range(projected.shape[1]):
            target = torch.tanh(inputs[t] + state @ self.weight_hh.T)  # (B, H)
            state = keeps[t] * state + moves[t] * target
            states.append(state)
        return torch.stack(states, dim=1)  # (B, T, H)

    def extra_repr(self) -> str:  # noqa: D102
        return f"hidden_size={self.hidden_size}, n_masked={self.n_masked}"


def _check_dtype(x: torch.Tensor, weight: torch.Tensor, what: str) -> None:
    """Refuse an input of another dtype than the module's weights, outside an autocast
    that casts both (a raw matrix-product error, or a silent promotion to float64)."""
    if x.dtype != weight.dtype and not autocast_casts(x, weight.dtype):
        convert = f", or convert the module (.to({x.dtype}))" if x.dtype.is_floating_point else ""
        raise ValueError(
            f"{what} is {x.dtype}, but the recurrence's weights are {weight.dtype}: pass "
            f"it .to({weight.dtype}){convert}."
        )


def _checked_gaps(gaps: torch.Tensor, like: torch.Tensor, where: str) -> torch.Tensor:
    """``gaps`` in the dtype of ``like`` ``(B, T, .)``, after checking that they are
    ``(B, T)`` (a ``(B, T, 1)`` gap broadcast into states that mixed the sequences, an
    extra column was ignored) and, on a CPU outside torch.func transforms, where reading
    them costs no wait for a device, neither negative nor NaN after the first step: a
    negative gap makes the decay a growth, and the state, which the cell declares
    bounded, runs to infinity."""
    if not isinstance(gaps, torch.Tensor) or gaps.shape != like.shape[:2]:
        shape = tuple(gaps.shape) if isinstance(gaps, torch.Tensor) else type(gaps).__name__
        raise ValueError(
            f"{where}: gaps must be a tensor of shape (batch, steps) = {tuple(like.shape[:2])}, "
            f"the time since each sequence's previous step; got {shape}."
        )
    converted = gaps.to(like.dtype)
    if gaps.device.type == "cpu" and not functorch_transforms_active():
        later = converted[:, 1:]  # the first step's gap is never read (h_1 forgets h_0 = 0)
        # Infinite ones too, or beyond the dtype's range once read in it (1e5 in float16):
        # exp(-rate * inf) is 0, but its gradient and the time since an observation are NaN.
        bad = (later < 0) | ~torch.isfinite(later) if later.is_floating_point() else later < 0
        if bool(bad.any()):
            sequence, step = (int(v) for v in bad.nonzero()[0].tolist())
            step += 1
            given = gaps[sequence, step].item()
            if math.isfinite(given) and given >= 0:
                raise ValueError(
                    f"{where}: the gap {given!r} at step {step} of sequence {sequence} is beyond the "
                    f"range of {like.dtype}, the dtype it is read in. Express the times in a larger "
                    "unit (or scale the gaps), so that they fit."
                )
            raise ValueError(
                f"{where}: gaps must be non-negative and finite times since the previous step; got "
                f"{given!r} at step {step} of sequence {sequence}. Times must not decrease within "
                "a sequence, and a missing time has no gap: fill it first."
            )
    return converted


def _inverse_softplus(rate: torch.Tensor) -> torch.Tensor:
    """``rho`` with ``softplus(rho) = rate``."""
    return torch.log(torch.expm1(rate))


class DecayCell(Cell):
    """The time-aware 'decay' cell: :class:`DecayRecurrence` in the first layer, 'tanh' above.

    It reads the gap since the previous step (:attr:`~Cell.needs_gaps`), starts from a
    zero state (no learned initial state), and is written in plain tensor operations,
    so :func:`torch.func.vmap` vectorizes it over models (:attr:`~Cell.stackable`); it
    has no step-by-step recurrence with a hand-written backward pass, hence no temporal
    gradients. Its L2 penalty ``alpha='auto'`` is 10: it keeps its memory in its
    relaxation rates, which are not bounded by a gate.

    Examples
    --------
    >>> from sklearn_rnn.nn import get_cell
    >>> decay = get_cell("decay")
    >>> decay.needs_gaps, decay.temporal_gradients, decay.stackable, decay.default_alpha
    (True, False, True, 10.0)
    """

    name = "decay"
    upper = "tanh"
    needs_gaps = True
    learned_initial = False
    stackable = True
    default_alpha = 10.0
    writes_every_value = True

    def make_recurrence(
        self, hidden_size: int, *, n_masked: int = 0, device: torch.device | str | None = None
    ) -> DecayRecurrence:
        """A :class:`DecayRecurrence` of ``hidden_size`` units decaying ``n_masked`` inputs.

        Parameters
        ----------
        hidden_size : int
        n_masked : int, default=0
        device : torch.device or str, optional

        Returns
        -------
        DecayRecurrence
        """
        return DecayRecurrence(hidden_size, n_masked=n_masked, device=device)

    def reset_parameters(
        self,
        projection: nn.Linear,
        recurrence: nn.Module,
        *,
        spectral_radius: float | None,
        generator: torch.Generator | None,
    ) -> None:
        """The decays (:meth:`DecayRecurrence.reset_decays`), then ``W_rec``, ``W_in`` and ``b`` as for the Elman cell.

        Parameters
        ----------
        projection : torch.nn.Linear
        recurrence : DecayRecurrence
        spectral_radius : float or None
        generator : torch.Generator or None
        """
        recurrence.reset_decays()
        reset_affine_(projection, recurrence.weight_hh, spectral_radius, generator)

    def recurrent_weight(self, recurrence: nn.Module) -> nn.Parameter:  # noqa: D102
        return recurrence.weight_hh

    def forward_states(
        self,
        projection: nn.Linear,
        recurrence: nn.Module,
        z: torch.Tensor,
        initial: tuple[torch.Tensor, ...],
        gaps: torch.Tensor | None,
    ) -> LayerStates:
        """Decayed inputs, their projection, the time-aware recurrence (``h_0 = 0``).

        Parameters
        ----------
        projection : torch.nn.Linear
        recurrence : DecayRecurrence
        z : torch.Tensor of shape (batch, steps, input_size)
        initial : tuple
            Empty: the state starts at zero.
        gaps : torch.Tensor of shape (batch, steps)
            Time since the previous step.

        Returns
        -------
        LayerStates
        """
        if gaps is None:  # the network passes them to a cell that needs_gaps
            raise ValueError(
                f"cell={self.name!r} reads the time since each previous step: pass gaps, a "
                f"tensor of shape (batch, steps) = {tuple(z.shape[:2])}; got None."
            )
        if len(initial):
            raise ValueError(
                f"cell={self.name!r} starts from a zero state and takes no initial state: "
                f"pass initial=(); got {len(initial)} tensor(s)."
            )
        x = recurrence.decay_inputs(z, gaps)  # (B, T, input_size)
        projected = projection(x)  # (B, T, H)
        hidden = recurrence(projected, gaps)  # (B, T, H); h_0 = 0
        return LayerStates(x, projected, hidden, ())


register_cell(DecayCell())
