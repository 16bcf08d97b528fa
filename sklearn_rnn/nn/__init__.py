"""PyTorch building blocks: the recurrent network and its initialization."""

from ._network import CELLS, NetworkStates, RecurrentNetwork
from .init import spectral_radius_

__all__ = ["CELLS", "NetworkStates", "RecurrentNetwork", "spectral_radius_"]
