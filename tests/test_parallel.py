"""Parallel fits: joblib backends and a Dask cluster, CPU threads per worker, no files."""

import os
import tempfile
import warnings

import joblib
import numpy as np
import pytest
import torch
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import GridSearchCV

from _helpers import THREAD_VARIABLES

from sklearn_rnn import RNNClassifier
from sklearn_rnn import _parallel
from sklearn_rnn._parallel import limit_torch_threads, worker_thread_budget

GRID = {"spectral_radius": [0.8, 1.2], "clip_threshold": [0.5, 1.0]}


def task(n=40, seed=0):
    rng = np.random.default_rng(seed)
    X = [rng.normal(size=(rng.integers(2, 6), 2)) for _ in range(n)]
    return X, np.array([int(x[:, 0].sum() > 0) for x in X])


def torch_threads(estimator, X, y):
    """A 'score': the torch threads of the process (and thread) that fitted the estimator."""
    return float(torch.get_num_threads())


def process_id(estimator, X, y):
    return float(os.getpid())


def search(grid=GRID, n_jobs=-1):
    return GridSearchCV(
        RNNClassifier(hidden_size=4, max_iter=3, batch_size=16, random_state=0, device="cpu"),
        grid,
        cv=2,
        n_jobs=n_jobs,
        scoring={"accuracy": "accuracy", "threads": torch_threads, "pid": process_id},
        refit="accuracy",
    )


def per_fit(result, name):
    """The values a scorer returned for each fit (one per candidate and split)."""
    return {float(v) for key, values in result.cv_results_.items()
            if key.startswith("split") and key.endswith(f"_test_{name}") for v in values}


def files_under(folder):
    return sorted(os.path.relpath(os.path.join(root, name), folder)
                  for root, _, names in os.walk(folder) for name in names)


# ---------------------------------------------------------------- the budget
def test_no_budget_outside_a_pool():
    assert worker_thread_budget() is None
    before = torch.get_num_threads()
    limit_torch_threads()
    assert torch.get_num_threads() == before


def test_budget_in_pools(monkeypatch):
    class FakeWorker:
        class state:
            nthreads = 4

    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr(_parallel, "_dask_worker", lambda: FakeWorker())
    assert worker_thread_budget() == max(1, joblib.cpu_count() // 4)
    share = max(1, joblib.cpu_count() // 4)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # what Dask's nanny sets for a worker process
    assert worker_thread_budget() == 1
    # A worker in the caller's process reads the user's own variable, often every core:
    # each of its 4 threads took them all.
    monkeypatch.setenv("OMP_NUM_THREADS", str(4 * share))
    assert worker_thread_budget() == share
    monkeypatch.setenv("OMP_NUM_THREADS", "lots")  # unreadable: ignored
    assert worker_thread_budget() == max(1, joblib.cpu_count() // 4)
    monkeypatch.setattr(_parallel, "_dask_worker", lambda: None)
    # A joblib task running in a thread of this process gets one thread.
    with joblib.parallel_config(backend="threading"):
        budgets = joblib.Parallel(n_jobs=2)(joblib.delayed(worker_thread_budget)() for _ in range(2))
    assert budgets == [1, 1]


def test_a_dask_worker_s_share_counts_the_cpus_this_process_may_use(monkeypatch):
    # os.cpu_count() counts the host's cores, ignoring CPU affinity and cgroup quotas: in a
    # container limited to 4 CPUs of a 64-core host, a worker of 4 threads gave each task
    # 16 threads. joblib.cpu_count(), as Dask's own CPU_COUNT, counts what may be used.
    class FakeWorker:
        class state:
            nthreads = 1

    usable = joblib.cpu_count()
    monkeypatch.setattr(os, "cpu_count", lambda: 4096 * usable)  # the host, far beyond them
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr(_parallel, "_dask_worker", lambda: FakeWorker())
    assert worker_thread_budget() == joblib.cpu_count() == usable


def test_threading_backend_fits_use_one_thread_each():
    X, y = task()
    main_threads = torch.get_num_threads()
    with warnings.catch_warnings(), joblib.parallel_config(backend="threading"):
        warnings.simplefilter("ignore", ConvergenceWarning)
        result = search({"spectral_radius": [0.8, 1.2]}, n_jobs=2).fit(X, y)
    assert per_fit(result, "threads") == {1.0}
    assert torch.get_num_threads() == main_threads  # the caller's setting is untouched


def test_process_workers_share_the_cpu():
    X, y = task()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        result = search({"spectral_radius": [0.8, 1.2]}, n_jobs=2).fit(X, y)  # joblib's loky
    share = max(1, (os.cpu_count() or 1) // 2)
    assert max(per_fit(result, "threads")) <= share
    assert float(os.getpid()) not in per_fit(result, "pid")


def test_a_stacked_search_s_jobs_keep_the_callers_scikit_learn_config(monkeypatch):
    # train_stacked ran its chunks with plain joblib, which does not carry scikit-learn's
    # thread-local config into its tasks (threads included), as scikit-learn's searches do.
    import sklearn

    from sklearn_rnn import RNNGridSearchCV, _stacked

    seen = []
    train_chunk = _stacked._train_chunk

    def recording(*args):
        seen.append(sklearn.get_config()["assume_finite"])
        return train_chunk(*args)

    monkeypatch.setattr(_stacked, "_train_chunk", recording)
    X, y = task()
    search = RNNGridSearchCV(RNNClassifier(hidden_size=4, max_iter=1, random_state=0),
                             {"spectral_radius": [0.8, 1.2]}, cv=2, n_jobs=2, refit=False)
    with warnings.catch_warnings(), joblib.parallel_config(backend="threading"):
        warnings.simplefilter("ignore", ConvergenceWarning)
        with sklearn.config_context(assume_finite=True):
            search.fit(X, y)
    assert len(seen) == 2 and set(seen) == {True}


# ------------------------------------------------------------------ files
def test_estimators_write_no_files(tmp_path, monkeypatch):
    work, temporary = tmp_path / "work", tmp_path / "tmp"
    work.mkdir(), temporary.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.setenv("TMPDIR", str(temporary))
    monkeypatch.setattr(tempfile, "tempdir", str(temporary))
    X, y = task()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        clf = RNNClassifier(hidden_size=4, max_iter=3, early_stopping=True, verbose=0).fit(X, y)
        clf.partial_fit(X, y)
        clf.predict_proba(X)
        clf.score(X, y)
    assert files_under(work) == [] and files_under(temporary) == []


# ------------------------------------------------------------------- Dask
@pytest.mark.dask
def test_grid_search_on_a_local_dask_cluster(tmp_path, monkeypatch):
    distributed = pytest.importorskip("distributed")
    # Dask's nanny sets these in this process's environment for its workers and leaves
    # them: later tests' subprocesses then started on one thread.
    for name in THREAD_VARIABLES:
        monkeypatch.setenv(name, os.environ.get(name, ""))
        if not os.environ[name]:
            monkeypatch.delenv(name)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    X, y = task()
    cluster = distributed.LocalCluster(
        n_workers=2,
        threads_per_worker=1,
        processes=True,
        dashboard_address=None,
        local_directory=str(tmp_path / "dask"),
    )
    try:
        with distributed.Client(cluster) as client:
            worker_pids = set(client.run(os.getpid).values())
            with warnings.catch_warnings(), joblib.parallel_backend("dask"):
                warnings.simplefilter("ignore", ConvergenceWarning)
                result = search().fit(X, y)
    finally:
        cluster.close(timeout=20)
    assert len(result.cv_results_["params"]) == 4
    assert np.isfinite(result.cv_results_["mean_test_accuracy"]).all()
    assert per_fit(result, "pid") <= {float(pid) for pid in worker_pids}
    assert per_fit(result, "threads") == {1.0}  # one per worker process
    assert result.best_params_["spectral_radius"] in (0.8, 1.2)
    assert result.predict_proba(X[:3]).shape == (3, 2)
    assert files_under(work) == []  # the fits wrote nothing next to each other


@pytest.mark.dask
def test_a_search_on_an_in_process_dask_cluster_leaves_the_callers_thread_count():
    # Dask's worker threads were left out of the task threads that put the count back:
    # with Client(processes=False) the caller's process stayed on 1 thread (its main
    # thread's first reading after the search took the workers' last setting).
    pytest.importorskip("distributed")
    import subprocess
    import sys
    import textwrap

    script = textwrap.dedent("""
        import warnings; warnings.simplefilter("ignore")
        import numpy as np, torch
        from distributed import Client
        from joblib import parallel_config
        from sklearn.model_selection import GridSearchCV
        from sklearn_rnn import RNNRegressor
        if __name__ == "__main__":
            rng = np.random.default_rng(0)
            X = [rng.normal(size=(4, 2)) for _ in range(20)]; y = rng.normal(size=20)
            with Client(processes=False, dashboard_address=None), parallel_config(backend="dask"):
                GridSearchCV(RNNRegressor(hidden_size=4, max_iter=1), {"alpha": [1e-4, 1e-3]}, cv=2,
                             refit=False).fit(X, y)
            import threading
            seen = []
            thread = threading.Thread(target=lambda: seen.append(torch.get_num_threads()))
            thread.start(); thread.join()
            print(torch.get_num_threads(), seen[0])  # the caller, and a thread started after
    """)
    env = {k: v for k, v in __import__("os").environ.items() if k not in THREAD_VARIABLES}
    run = lambda code: subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,  # noqa: E731
                                      env=env, check=True, timeout=300).stdout.strip()
    fresh = run("import torch; print(torch.get_num_threads())")
    if fresh == "1":
        pytest.skip("torch runs one thread here: a lowered count cannot be told from it")
    assert run(script) == f"{fresh} {fresh}"


@pytest.mark.dask
def test_in_process_dask_workers_share_the_process_s_cpus():
    # Each task's share divided the CPUs by its own worker's threads only: two in-process
    # workers of one thread each took every core apiece (4 threads on 2 cores).
    distributed = pytest.importorskip("distributed")
    from sklearn_rnn._parallel import _environment_threads, worker_thread_budget

    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                  dashboard_address=None) as cluster, distributed.Client(cluster) as client:
        shares = client.gather(client.map(lambda i: worker_thread_budget(), range(4)))
    expected = max(1, joblib.cpu_count() // 2)
    environment = _environment_threads()  # OMP_NUM_THREADS and the like, read within the share
    assert set(shares) == {expected if environment is None else min(environment, expected)}
