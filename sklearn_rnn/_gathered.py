"""Training's warnings, gathered for one summary without the process-wide warning state.

Training many networks at once (:func:`~sklearn_rnn._stacked.train_stacked`) reports each
kind of warning once, counted over the networks, rather than once per network. Catching
them with :func:`warnings.catch_warnings` would swap process-wide state, which searches
running in threads undo for one another: summaries were lost or garbled, and an "always"
filter was left behind for the process. The package's own training warnings go through
:func:`warn` instead, which hands them to the gatherer of the calling thread's context,
if there is one, and to :func:`warnings.warn` otherwise.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import sys
import warnings
from collections.abc import Iterator

__all__ = ["gathered_warnings", "outside_stacklevel", "warn"]

_gatherer: contextvars.ContextVar[list[tuple[type[Warning], str]] | None] = contextvars.ContextVar(
    "sklearn_rnn_gathered_warnings", default=None
)


def warn(message: str, category: type[Warning], stacklevel: int = 1) -> None:
    """:func:`warnings.warn`, or, inside :func:`gathered_warnings`, add to what it gathers.

    Parameters
    ----------
    message : str
    category : type of Warning
    stacklevel : int, default=1
        As for :func:`warnings.warn` called where this is called.

    Examples
    --------
    >>> from sklearn_rnn._gathered import gathered_warnings, warn
    >>> with gathered_warnings() as gathered:
    ...     warn("epoch 3 diverged", RuntimeWarning)
    >>> gathered
    [(<class 'RuntimeWarning'>, 'epoch 3 diverged')]
    """
    gatherer = _gatherer.get()
    if gatherer is None:
        warnings.warn(message, category, stacklevel=stacklevel + 1)
    else:
        gatherer.append((category, message))


#: The package's folder: frames of its files are not the caller's.
_PACKAGE = os.path.dirname(os.path.abspath(__file__)) + os.sep


def _library_folders() -> tuple[str, ...]:
    """The folders of the package and of the libraries it calls back through (scikit-
    learn's wrappers around fit, its pipelines and searches, and joblib, which its
    cross-validation and searches run through even with ``n_jobs=None``; skorch's loop)."""
    folders = [_PACKAGE]
    for name in ("sklearn", "skorch", "joblib"):
        module = sys.modules.get(name)
        if module is not None and getattr(module, "__file__", None):
            folders.append(os.path.dirname(os.path.abspath(module.__file__)) + os.sep)
    return tuple(folders)


def outside_stacklevel() -> int:
    """The ``stacklevel`` with which :func:`warnings.warn`, called in the function that
    calls this, points at the first frame outside the package and the libraries it is
    called through (scikit-learn, skorch): the line of the user's code that called a
    public method or a pipeline, however deep the warning is raised (Python's default
    filter shows a warning once per place, so one attributed to the package was shown
    once per process).

    Returns
    -------
    int

    Examples
    --------
    >>> from sklearn_rnn._gathered import outside_stacklevel
    >>> outside_stacklevel()  # called from outside the package: its caller is outside
    1
    """
    folders = _library_folders()
    frame = sys._getframe(1)
    level = 1
    while frame is not None and frame.f_code.co_filename.startswith(folders):
        frame = frame.f_back
        level += 1
    return level


@contextlib.contextmanager
def gathered_warnings() -> Iterator[list[tuple[type[Warning], str]]]:
    """Gather :func:`warn`'s warnings of this thread's context in a list, as pairs of
    category and message, instead of issuing them.

    Yields
    ------
    list of (type of Warning, str)
        Filled while the block runs.
    """
    gathered: list[tuple[type[Warning], str]] = []
    token = _gatherer.set(gathered)
    try:
        yield gathered
    finally:
        _gatherer.reset(token)
