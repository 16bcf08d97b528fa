"""Keep parallel fits from oversubscribing the CPU with torch threads.

scikit-learn parallelizes hyperparameter searches and cross-validation through joblib;
each task fits one estimator, and each fit would by default run torch's intra-op
parallelism on every core of the machine. With ``n_jobs`` tasks at once that is
``n_jobs`` times too many threads, which slows everything down. The estimators call
:func:`limit_torch_threads` at the start of ``fit``, ``partial_fit`` and prediction:
inside a task of a parallel pool it lowers torch's thread count to the task's share of
the CPU; outside any pool it changes nothing.

The share is:

- in a worker *process* of joblib or of Dask: ``OMP_NUM_THREADS`` when set, which
  joblib's 'loky' backend sets to ``cpu_count // n_jobs`` and Dask's nanny to 1 in the
  environment of its worker processes (torch usually reads it at import; setting it
  again covers a torch imported before the variable was set); joblib's
  'multiprocessing' backend sets no variable, and its workers keep torch's own count;
- in a Dask worker without that variable: ``cpu_count // nthreads`` of the worker, which
  also caps the variable (a worker in the caller's process reads the user's own);
  ``cpu_count`` is :func:`joblib.cpu_count`, the CPUs the process may use (its CPU
  affinity and container quotas), as Dask sizes ``nthreads``;
- in a task *thread* sharing its process with other tasks (joblib's 'threading'
  backend): 1.

A worker process keeps the lowered count after the task (it runs one task at a time,
and the next needs the same). A task thread sharing its process (joblib's threading
backend, Dask's worker threads) puts its own count back when its fit ends. torch's
count is per thread, but a thread's first reading takes the count last set anywhere in
the process, so the last task to end also leaves that count as it was before the tasks
lowered it (a search in threads left its caller, and threads started later, on one).

Outside pools, the networks these estimators train are usually small: a step multiplies
a batch of 32 by a 50 x 50 matrix, work that takes longer to split across threads than
to do on one. :func:`fit_threads` therefore runs each ``fit``, ``partial_fit`` and
prediction of a small network (``batch_size * hidden_size**2`` below
:data:`SMALL_WORK`) on one intra-op thread and restores the caller's setting
afterwards; :func:`torch_threads` chooses the count explicitly.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import os
import sys
import threading
from collections.abc import Callable, Iterator
from numbers import Integral
from typing import Any, TypeVar

import torch
from sklearn import config_context, get_config

__all__ = [
    "MAX_THREADS",
    "SMALL_WORK",
    "fit_threads",
    "fitting_threads",
    "limit_torch_threads",
    "torch_threads",
    "worker_thread_budget",
]

#: ``batch_size * hidden_size**2`` below which a fit or prediction runs on one thread.
#: Measured with ``benchmarks/bench_threads.py``: on 2 cores one thread was 1.6 to 5
#: times faster than two from hidden size 50 (batch 32) up to hidden size 512 (batch
#: 256, 2**26). The bound is exclusive (the docs: up to 511 units at batch 256), so that
#: last measured size and larger networks keep torch's own setting.
SMALL_WORK = 2**26

#: The most intra-op threads :func:`torch.set_num_threads` takes (a C ``int``).
MAX_THREADS = 2**31 - 1

# The importing thread reads its count now. A thread's first reading takes the count
# last set anywhere in the process, so a main thread that set its count (say 2) without
# ever reading it took a background fit's 1 when it next read it.
torch.get_num_threads()

_chosen: contextvars.ContextVar[int | None] = contextvars.ContextVar(
    "sklearn_rnn_torch_threads", default=None
)

_Method = TypeVar("_Method", bound=Callable[..., Any])
_Result = TypeVar("_Result")


def worker_thread_budget() -> int | None:
    """torch threads for a fit running as a task of a joblib or Dask pool.

    Returns
    -------
    int or None
        The task's share of the CPU (see the module's description), or None outside a
        pool: leave torch's setting as it is.

    Examples
    --------
    >>> from sklearn_rnn._parallel import worker_thread_budget
    >>> worker_thread_budget() is None  # the main thread, no pool
    True
    """
    environment = _environment_threads()
    worker = _dask_worker()
    if worker is not None:
        from joblib import cpu_count  # the CPUs this process may use (affinity, quotas)

        share = max(1, cpu_count() // _task_threads_of_process(worker))
        # The variable as Dask's nanny sets it for a worker process, within the share: a
        # worker in the caller's process (Client(processes=False)) reads the user's own,
        # often every core, which each of its threads would take.
        return min(environment, share) if environment is not None else share
    if not _in_joblib_task():
        return None
    if threading.current_thread() is not threading.main_thread():
        return 1  # a thread of a pool that shares this process
    return environment


def limit_torch_threads() -> None:
    """Lower torch's thread count to :func:`worker_thread_budget` inside a pool task.

    Never raises it, and does nothing outside a pool.

    Examples
    --------
    >>> import torch
    >>> from sklearn_rnn._parallel import limit_torch_threads
    >>> before = torch.get_num_threads()
    >>> limit_torch_threads()
    >>> torch.get_num_threads() == before  # not in a pool
    True
    """
    budget = worker_thread_budget()
    if budget is not None and torch.get_num_threads() > budget:
        torch.set_num_threads(budget)


def _environment_threads() -> int | None:
    value = os.environ.get("OMP_NUM_THREADS", "").strip()
    return int(value) if value.isdigit() and int(value) > 0 else None


def _in_joblib_task() -> bool:
    # Inside a task, joblib makes the nested backend active; its nesting level is >= 1.
    from joblib.parallel import get_active_backend

    backend, _ = get_active_backend()
    return getattr(backend, "nesting_level", 0) >= 1


def _task_threads_of_process(worker: Any) -> int:
    """The task threads of every Dask worker running in this process: one in a worker
    process, all of an in-process cluster's (``LocalCluster(processes=False,
    n_workers=k)``), whose tasks share its CPUs."""
    from distributed import Worker

    here = [other for other in list(getattr(Worker, "_instances", ()))  # those alive in this process
            if getattr(getattr(other, "status", None), "name", "") in ("running", "paused")]
    together = sum(int(other.state.nthreads) for other in here if other is not worker)
    return max(1, int(worker.state.nthreads)) + together


def _dask_worker() -> Any:
    if "distributed" not in sys.modules:  # never import Dask for this check
        return None
    from distributed import get_worker

    try:
        return get_worker()
    except ValueError:  # "No worker found": not running in a Dask task
        return None


@contextlib.contextmanager
def torch_threads(n_threads: int | None) -> Iterator[None]:
    """Run the estimators' fits and predictions on ``n_threads`` torch threads.

    By default a fit or prediction of a small network runs on one intra-op thread
    (see :data:`SMALL_WORK`), a larger one on torch's own setting
    (:func:`torch.get_num_threads`); either way the caller's setting is restored
    afterwards. Inside this context every fit, ``partial_fit`` and prediction of this
    thread uses ``n_threads`` instead, or torch's own setting with ``None``, and so do
    those of the package's own pools started in it: the stacks of
    :class:`~sklearn_rnn.RNNGridSearchCV` and the folds of
    :func:`~sklearn_rnn.clinical.pooled_cross_validate` (so
    :class:`~sklearn_rnn.clinical.PBCStudy`) with ``n_jobs``. Inside a task of a joblib
    or Dask pool the task's share of the CPU still caps the count, so a grid search with
    ``n_jobs`` keeps one thread per worker on a full machine.

    Pools the package does not run start their tasks without the choice, which a
    worker process or a pool's thread does not inherit: scikit-learn's
    ``GridSearchCV`` or ``cross_val_score`` with ``n_jobs`` above 1, a
    ``joblib.Parallel`` of your own. Their fits take the default count, within the
    task's share. To choose it there, enter ``torch_threads`` inside the task (in the
    function the pool runs); or fit the search with ``n_jobs=1`` inside this context;
    or give joblib's worker processes more threads with
    ``joblib.parallel_config(inner_max_num_threads=n)``, which a larger network takes
    (a small one still runs on one).

    torch keeps the count per thread, and a thread's first torch call takes the count
    last set anywhere in the process: a thread whose first torch call falls inside
    another thread's fit starts on that fit's count, one for a small network, and keeps
    it. Such a thread should call ``torch.get_num_threads()`` and then
    ``torch.set_num_threads(n)`` when it starts.

    Parameters
    ----------
    n_threads : int or None
        Intra-op threads (from 1 to ``2**31 - 1``, the most
        :func:`torch.set_num_threads` takes), or None for torch's current setting.

    Yields
    ------
    None

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_rnn import RNNRegressor, torch_threads
    >>> X = [np.ones((3, 1)), np.zeros((2, 1))]
    >>> with torch_threads(2):  # e.g. for a large network on a many-core machine
    ...     model = RNNRegressor(hidden_size=4, max_iter=2).fit(X, [1.0, 0.0])
    """
    if n_threads is not None and (
        isinstance(n_threads, bool) or not isinstance(n_threads, Integral) or n_threads < 1
    ):
        raise ValueError(
            f"n_threads must be a positive integer or None (torch's own setting); got "
            f"{n_threads!r}."
        )
    if n_threads is not None and n_threads > MAX_THREADS:
        raise ValueError(
            f"n_threads must be at most {MAX_THREADS} (a C int), the most "
            f"torch.set_num_threads takes; got {n_threads!r}. Pass the threads to use, e.g. "
            "joblib.cpu_count(), or None for torch's own setting."
        )
    token = _chosen.set(int(n_threads) if n_threads is not None else 0)  # numpy ints too
    try:
        yield
    finally:
        _chosen.reset(token)


def fit_threads(hidden_size: int, batch_size: int) -> int | None:
    """Intra-op threads for one fit or prediction outside a pool, or None to keep
    torch's setting.

    Parameters
    ----------
    hidden_size, batch_size : int
        The network's units per layer and the sequences per batch.

    Returns
    -------
    int or None
        The count chosen with :func:`torch_threads`, else 1 for a small network
        (``batch_size * hidden_size**2 < SMALL_WORK``), else None.

    Examples
    --------
    >>> from sklearn_rnn._parallel import fit_threads
    >>> fit_threads(hidden_size=50, batch_size=32)
    1
    >>> fit_threads(hidden_size=1024, batch_size=256) is None
    True
    """
    chosen = _chosen.get()
    if chosen is not None:
        return chosen or None
    # In Python ints: NumPy int32 sizes wrapped to a negative product, "small".
    return 1 if int(batch_size) * int(hidden_size) ** 2 < SMALL_WORK else None


@contextlib.contextmanager
def fitting_threads(hidden_size: int, batch_size: int) -> Iterator[None]:
    """Run the block on :func:`fit_threads`'s count (after :func:`limit_torch_threads`,
    within a pool task's share), restoring torch's thread count afterwards.

    Parameters
    ----------
    hidden_size, batch_size : int
        The network's units per layer and the sequences per batch (for networks
        trained together, the sequences of all of their batches).

    Yields
    ------
    None

    Examples
    --------
    >>> import torch
    >>> from sklearn_rnn._parallel import fitting_threads
    >>> before = torch.get_num_threads()
    >>> with fitting_threads(hidden_size=50, batch_size=32):
    ...     torch.get_num_threads()
    1
    >>> torch.get_num_threads() == before
    True
    """
    with _task_share():  # inside a pool: the task's share
        own = before = torch.get_num_threads()
        outside = not _in_pool_thread()
        # Not a fit nested in this thread's own, nor one under torch_threads: there the
        # caller chose, and this thread's count is kept whatever it is (a thread's own
        # count equal to the lowered one cannot be told from it otherwise).
        if outside and not getattr(_fits_here, "depth", 0) and _chosen.get() is None:
            with _shared_lock:
                if _outside_fits["running"] and own == _outside_fits["lowered"]:
                    # Another thread's fit has lowered the count, and this thread reads that
                    # count (a thread started then takes it): putting it back left the thread
                    # on one thread for good. The count from before that fit. (A count this
                    # thread set itself to another value, or an outer fit's of its own,
                    # stays its own.)
                    before = _outside_fits["before"]
        target = fit_threads(hidden_size, batch_size)
        if target is None:
            target = before  # torch's own setting
        if target == own == before:
            yield
            return
        budget = worker_thread_budget()
        if budget is not None:
            target = min(target, budget)
        with _shared_lock:
            torch.set_num_threads(target)
            if outside:  # a pool starting now reads the count from before this fit
                if not _outside_fits["running"]:
                    _outside_fits["before"], _outside_fits["lowered"] = before, target
                _outside_fits["running"] += 1
        _fits_here.depth = getattr(_fits_here, "depth", 0) + 1
        try:
            yield
        finally:
            _fits_here.depth -= 1
            with _shared_lock:
                if outside:
                    _outside_fits["running"] -= 1
                torch.set_num_threads(before)


#: Task threads of a pool in this process now inside :func:`_task_share`, and torch's
#: thread count before the first of them lowered it.
_shared_tasks: dict[str, int] = {"running": 0, "before": 0}
#: Fits outside pools now lowering torch's count (:func:`fitting_threads` in a thread of
#: no pool), and the count before the first of them did: the count a pool starting
#: meanwhile restores when it ends (its own reading then was the lowered one, which it
#: wrote back for every thread started later, after the fit had restored it), and the
#: count the first of them set (a thread reading that count got it from those fits).
_outside_fits: dict[str, int] = {"running": 0, "before": 0, "lowered": 0}
#: This thread's fits now running (a fit nested in another, as a callback's predict).
_fits_here = threading.local()
_shared_lock = threading.Lock()


def _in_pool_thread() -> bool:
    """Whether this thread is a task thread of a pool sharing the process (joblib's
    threading backend, Dask's worker threads), as :func:`_task_share` tells them."""
    return worker_thread_budget() is not None and threading.current_thread() is not threading.main_thread()


def threads_chosen() -> bool:
    """Whether a :func:`torch_threads` block chose the count of the fits running here
    (a number, or None for torch's own setting).

    Returns
    -------
    bool

    Examples
    --------
    >>> from sklearn_rnn._parallel import threads_chosen, torch_threads
    >>> threads_chosen()
    False
    >>> with torch_threads(None):
    ...     threads_chosen()
    True
    """
    return _chosen.get() is not None


@contextlib.contextmanager
def _task_share() -> Iterator[None]:
    """:func:`limit_torch_threads` for a block: a worker process keeps the lowered
    count (it runs one task at a time); a task thread sharing this process (joblib's
    threading backend, Dask's worker threads) puts its own count back when the block
    ends: its reading at the start, within a nested block the outer block's count.

    torch's count is per thread, but a thread's first reading takes the count last set
    anywhere in the process: a search in threads left its caller, and threads started
    later, on one thread. So the last running block leaves that count as it was before
    the first running block lowered it: read, as the first block begins, in a thread of
    its own (a pool thread's own reading may be that count, or one from an earlier call
    that the user has changed since)."""
    # Dask's worker threads too: an in-process cluster (Client(processes=False)) runs
    # them in the caller's process, which the lowered count otherwise stayed with.
    if not _in_pool_thread():
        limit_torch_threads()  # a worker process, or no pool: left as it is
        yield
        return
    own = torch.get_num_threads()
    with _shared_lock:
        if not _shared_tasks["running"]:  # what threads started now take, not a pool
            _shared_tasks["before"] = (  # thread's count of an earlier call
                _outside_fits["before"] if _outside_fits["running"] else _count_for_new_threads())
        _shared_tasks["running"] += 1
        limit_torch_threads()
    try:
        yield
    finally:
        with _shared_lock:
            torch.set_num_threads(own)  # this thread's count as the block found it
            _shared_tasks["running"] -= 1
            before = _shared_tasks["before"]
            if not _shared_tasks["running"] and before and own != before:
                _set_for_new_threads(before)


def _count_for_new_threads() -> int:
    """The count a thread's first reading takes now: read in a thread of its own."""
    counts: list[int] = []
    reader = threading.Thread(target=lambda: counts.append(torch.get_num_threads()), daemon=True)
    reader.start()
    reader.join()
    return counts[0]


def _set_for_new_threads(count: int) -> None:
    """Make ``count`` what a thread's first reading takes, leaving this thread's count:
    :func:`torch.set_num_threads` sets both, so it runs in a thread of its own."""
    setter = threading.Thread(target=torch.set_num_threads, args=(count,), daemon=True)
    setter.start()
    setter.join()


def with_fit_threads(method: _Method) -> _Method:
    """Decorate an estimator method to run under :func:`fitting_threads` for its
    ``hidden_size`` and ``batch_size``."""

    @functools.wraps(method)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        sizes = (getattr(self, "hidden_size", None), getattr(self, "batch_size", None))
        if not all(isinstance(size, Integral) and not isinstance(size, bool) for size in sizes):
            with _task_share():
                return method(self, *args, **kwargs)  # the parameter check reports it
        with fitting_threads(*sizes):
            return method(self, *args, **kwargs)

    return wrapper  # type: ignore[return-value]


def with_callers_context(function: Callable[..., _Result]) -> Callable[..., _Result]:
    """``function``, to run as a task of a pool under this thread's scikit-learn config
    and :func:`torch_threads` choice.

    Both are kept per thread (the config thread-local, the choice in a context
    variable), so a task in a pool's thread or worker process would otherwise run on
    the defaults. The warning filters are left
    alone: :func:`sklearn.utils.parallel.delayed` enters ``warnings.catch_warnings`` in
    every task, which swaps process-wide state that tasks in threads undo for one
    another.

    Parameters
    ----------
    function : callable
        A function of the module's top level (a worker process imports it).

    Returns
    -------
    callable
        ``function``, called with the same arguments under the config and the thread
        count chosen in the thread that called this; it pickles as ``function`` does.

    Examples
    --------
    >>> import sklearn
    >>> from sklearn_rnn._parallel import with_callers_context
    >>> with sklearn.config_context(assume_finite=True):
    ...     task = with_callers_context(sklearn.get_config)
    >>> task()["assume_finite"], sklearn.get_config()["assume_finite"]
    (True, False)
    """
    return functools.partial(_in_context, get_config(), _chosen.get(), function)


def _in_context(
    config: dict[str, Any],
    chosen: int | None,
    function: Callable[..., _Result],
    *args: Any,
    **kwargs: Any,
) -> _Result:
    token = _chosen.set(chosen)
    try:
        with config_context(**config):
            return function(*args, **kwargs)
    finally:
        _chosen.reset(token)
