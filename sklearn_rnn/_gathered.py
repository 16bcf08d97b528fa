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
import warnings
from collections.abc import Iterator

__all__ = ["gathered_warnings", "warn"]

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
