"""PyTorch building blocks: the recurrent network, its cells and its initialization."""

from ._conv import ConvStage
from ._network import NetworkStates, RecurrentNetwork
from .cells import CELLS, Cell, DecayRecurrence, get_cell, register_cell, unregister_cell
from .init import spectral_radius_

__all__ = [
    "CELLS",
    "Cell",
    "ConvStage",
    "DecayRecurrence",
    "NetworkStates",
    "RecurrentNetwork",
    "get_cell",
    "register_cell",
    "spectral_radius_",
    "unregister_cell",
]
