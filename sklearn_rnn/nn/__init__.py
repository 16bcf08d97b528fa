"""PyTorch building blocks: the recurrent network, its cells and its initialization."""

from ._decay import DecayRecurrence
from ._network import CELLS, NetworkStates, RecurrentNetwork
from .init import spectral_radius_

__all__ = ["CELLS", "DecayRecurrence", "NetworkStates", "RecurrentNetwork", "spectral_radius_"]
