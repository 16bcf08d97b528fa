"""Settings shared by the doctests under sklearn_rnn/ and the tests under tests/."""

import torch

torch.set_num_threads(1)
