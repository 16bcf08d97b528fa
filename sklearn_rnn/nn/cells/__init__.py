"""The cell room: one object per recurrent cell, in one registry.

A cell (``cell=`` of :class:`~sklearn_rnn.nn.RecurrentNetwork` and the estimators) is an
instance of :class:`Cell`, registered by name in :data:`CELLS`. It carries everything
the rest of the package asks about it: its gate blocks (``gates``), the module of its
recurrence (``make_recurrence``: a fused PyTorch kernel, or the time-aware
:class:`DecayRecurrence`), its initialization (``reset_parameters``, where the thesis'
spectral-radius initialization applies), how a layer runs (``forward``, and
``forward_states`` for temporal gradients), its step-by-step recurrence with the
hand-written backward pass (``stepwise``), one step in plain tensor operations for the
stacked grid search (``step``, run by ``forward_vectorizable``), what temporal gradients need from it
(``recurrent_deltas``, ``gate_recurrent_delta``), whether it reads time gaps
(``needs_gaps``), supports temporal gradients and so the simplex optimizer
(``temporal_gradients``), a learned initial state (``learned_initial``), the stacked
grid search (``stackable``), whether its state stays bounded over padding or must stop
at each sequence's end (``bounded_state``), and what the estimators' 'auto' settings mean for it
(``default_spectral_radius``, ``default_alpha``). The network, the temporal gradients,
:class:`~sklearn_rnn.optim.RecurrentAdapter` and the estimators ask the cell; none of
them branches on its name.

Where each cell lives:

* ``_base.py``: :class:`Cell`, :class:`FusedCell` (the layer code shared by the cells of
  PyTorch's fused kernels), :func:`stepwise_recurrence`, the registry;
* ``_stepwise.py``: the machinery the hand-written backward passes share;
* ``_elman.py`` ('tanh', 'relu'), ``_gru.py`` ('gru'), ``_lstm.py`` ('lstm'),
  ``_decay.py`` ('decay'): each cell's equations, forward and backward, in one file.

How to add a cell
-----------------
1. In one file, subclass :class:`Cell` (a recurrence written in tensor operations,
   as ``_decay.py`` does) or :class:`FusedCell` (one of PyTorch's fused kernels, with a
   ``stepwise`` recurrence and its backward pass, as ``_gru.py`` does). Set the
   class attributes that differ from the defaults (``name``, ``gates``, ...) and
   define the abstract methods ``make_recurrence``, ``reset_parameters``,
   ``recurrent_weight`` and ``forward_states`` (a :class:`FusedCell` has them all;
   it needs ``stepwise`` and, if its recurrent part is gated, ``gate_recurrent_delta``
   and ``recurrent_deltas``; with ``step``, one step in plain tensor operations, and
   ``stackable = True``, the stacked grid search trains it too).
   The network builds the module of ``make_recurrence`` on the CPU, keeping what its
   constructor sets, and leaves the input projection uninitialized: ``reset_parameters``
   writes all of the projection and draws the recurrence's random values from its
   ``generator``. A cell that leaves ``learned_initial`` True (the default) starts its
   recurrence from the ``initial`` states it is given and returns them in its
   ``LayerStates``; one that does not sets ``learned_initial = False``. A cell whose state can grow without bound sets ``bounded_state =
   False`` and takes ``lengths=`` in ``forward_states``, where it stops each sequence's
   state at its end.
2. Call ``register_cell(MyCell())`` at the end of that file.
3. Import the file: for a cell shipped with the package, one line below; for your
   own, import your module before fitting. ``cell='my_cell'`` then works in
   :class:`~sklearn_rnn.nn.RecurrentNetwork` and the estimators, with the optimizers
   the cell's attributes allow (``tests/test_cell_room.py`` registers a cell of its own
   and fits an :class:`~sklearn_rnn.RNNClassifier` with it). A pickle and a model file
   name your cell, and record its class and the plain settings of the instance (an
   :class:`ElmanCell`'s ``nonlinearity``): they load where a cell of that name is
   registered, and are refused where the name now means another cell (a notebook
   cell run again after an edit); register the cell the model ran under that name.

Nothing else changes: a test checks that no module outside this room compares a cell's
name or tests for a cell's class.
"""

# Each module registers its cells on import; this order is the registry's (and the
# order error messages list the cells in).
from . import _elman  # noqa: F401, I001
from . import _gru  # noqa: F401
from . import _lstm  # noqa: F401
from . import _decay  # noqa: F401
from . import _base
from ._base import (
    CELLS,
    Cell,
    CellNames,
    FusedCell,
    LayerStates,
    cell_names,
    cell_of_module,
    get_cell,
    normal_,
    register_cell,
    reset_affine_,
    stepwise_recurrence,
    uniform_,
    unregister_cell,
)
from ._decay import DecayCell, DecayRecurrence
from ._elman import ElmanCell
from ._gru import GRUCell
from ._lstm import FORGET_BIAS, LSTMCell

_base._PACKAGE_CELLS = dict(CELLS)  # the package's own cells; those a user registers come after

__all__ = [
    "CELLS",
    "FORGET_BIAS",
    "Cell",
    "CellNames",
    "DecayCell",
    "DecayRecurrence",
    "ElmanCell",
    "FusedCell",
    "GRUCell",
    "LSTMCell",
    "LayerStates",
    "cell_names",
    "cell_of_module",
    "get_cell",
    "normal_",
    "register_cell",
    "reset_affine_",
    "resolve_cell",
    "stepwise_recurrence",
    "uniform_",
    "unregister_cell",
]

#: What ``cell='auto'`` of the estimators becomes: the time-aware cell for timed
#: sequences (not with the simplex optimizer, which it has no temporal gradients for),
#: the thesis' cell with the simplex optimizer (and for the step classifier), the GRU
#: otherwise (the defaults chosen with ``benchmarks/bench_defaults.py``; docs: defaults.rst).
AUTO_TIMED, AUTO_THESIS, AUTO = "decay", "tanh", "gru"


def resolve_cell(cell: str, *, timed: bool, simplex: bool, thesis: bool = False) -> str:
    """The cell's name, with 'auto' read as the estimators read it.

    Parameters
    ----------
    cell : str
        A registered name or 'auto'.
    timed : bool
        Whether the sequences have a time feature.
    simplex : bool
        Whether the optimizer is 'simplex'.
    thesis : bool, default=False
        Whether 'auto' means the thesis' configuration (the step classifier).

    Returns
    -------
    str

    Examples
    --------
    >>> from sklearn_rnn.nn.cells import resolve_cell
    >>> resolve_cell("auto", timed=True, simplex=False), resolve_cell("auto", timed=True, simplex=True)
    ('decay', 'tanh')
    >>> resolve_cell("auto", timed=False, simplex=False), resolve_cell("lstm", timed=True, simplex=True)
    ('gru', 'lstm')
    """
    if cell != "auto":
        return cell
    if timed and not simplex:
        return AUTO_TIMED
    return AUTO_THESIS if simplex or thesis else AUTO
