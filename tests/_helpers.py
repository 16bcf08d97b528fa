"""Helpers shared by several test modules (imported as ``_helpers``: pytest puts this
folder on the import path, since ``tests`` is no package)."""

import contextlib
import warnings

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
