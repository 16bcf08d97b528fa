"""Keep parallel fits from oversubscribing the CPU with torch threads.

scikit-learn parallelizes hyperparameter searches and cross-validation through joblib;
each task fits one estimator, and each fit would by default run torch's intra-op
parallelism on every core of the machine. With ``n_jobs`` tasks at once that is
``n_jobs`` times too many threads, which slows everything down. The estimators call
:func:`limit_torch_threads` at the start of ``fit``, ``partial_fit`` and prediction:
inside a task of a parallel pool it lowers torch's thread count to the task's share of
the CPU; outside any pool it changes nothing.

The share is:

- in a worker *process* of joblib (the 'loky' and 'multiprocessing' backends) or of
  Dask: ``OMP_NUM_THREADS`` when set, which joblib sets to ``cpu_count // n_jobs`` and
  Dask's nanny to 1 in the environment of its worker processes (torch usually reads it
  at import; setting it again covers a torch imported before the variable was set);
- in a Dask worker without that variable: ``cpu_count // nthreads`` of the worker;
- in a task *thread* sharing its process with other tasks (joblib's 'threading'
  backend): 1.

torch's thread count belongs to the calling thread (OpenMP keeps it per thread), so a
task thread lowering it leaves the main thread's setting alone. Pools own their worker
processes and threads, so the lowered count is left in place after the task.
"""

from __future__ import annotations

import os
import sys
import threading
from typing import Any

import torch

__all__ = ["limit_torch_threads", "worker_thread_budget"]


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
        if environment is not None:
            return environment
        return max(1, (os.cpu_count() or 1) // max(1, int(worker.state.nthreads)))
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


def _dask_worker() -> Any:
    if "distributed" not in sys.modules:  # never import Dask for this check
        return None
    from distributed import get_worker

    try:
        return get_worker()
    except ValueError:  # "No worker found": not running in a Dask task
        return None
