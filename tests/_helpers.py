"""Helpers shared by several test modules (imported as ``_helpers``: pytest puts this
folder on the import path, since ``tests`` is no package)."""

import contextlib
import warnings

import torch
from sklearn.exceptions import ConvergenceWarning


@contextlib.contextmanager
def convergence_warning_allowed():
    """Short fits may or may not end with a ConvergenceWarning (it is raised only when
    the loss was still falling as a trend); these tests are about something else."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        yield


def quiet_fit(model, X, y):
    """``model.fit(X, y)``, allowing a ConvergenceWarning (short fits)."""
    with convergence_warning_allowed():
        return model.fit(X, y)


def on_device(cpu, gpu):
    """A tolerance: ``cpu`` where the estimators train on the CPU, ``gpu`` where a CUDA
    device is present and they train there by default. cuDNN's kernels (TensorFloat-32,
    sums in an order that changes with a batch's shape) move two fits or predictions of
    the same model apart by about 1e-5 relative in float32, 1e-16 in float64."""
    return gpu if torch.cuda.is_available() else cpu


#: Environment variables that set a fresh process's thread count (a subprocess that
#: checks torch's own count runs without them; Dask's nanny, for one, sets all three).
THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")
