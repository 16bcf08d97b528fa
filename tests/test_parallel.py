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


class _SlowFit:
    """A tiny classifier that takes 0.2 s to fit and counts its fits (par44)."""

    fits: list[float] = []

    def __init__(self, bad=False):
        self.bad = bad

    def get_params(self, deep=True):
        return {"bad": self.bad}

    def set_params(self, **params):
        self.bad = params.get("bad", self.bad)
        return self

    def fit(self, X, y):
        import time

        time.sleep(0.2)
        self.classes_ = np.unique(y)
        _SlowFit.fits.append(time.perf_counter())
        return self

    def predict_proba(self, X):
        return np.full((len(X), 2), np.nan if self.bad else 0.5)


def test_an_error_in_pooled_cross_validation_cancels_the_folds_not_started():
    # par44: the result generator was never closed: with the traceback kept (IPython keeps
    # the last), its pool fitted every remaining fold (18 of 20) after the call raised.
    import time

    from sklearn_rnn.clinical import pooled_cross_validate

    X, y = np.random.RandomState(0).randn(40, 2), np.array([0, 1] * 20)
    _SlowFit.fits = []
    with pytest.raises(ValueError, match="fold 0") as kept:
        with joblib.parallel_config(backend="threading"):
            pooled_cross_validate(_SlowFit(bad=True), X, y, n_splits=5, n_repeats=4, n_jobs=2)
    raised = time.perf_counter()
    time.sleep(1.0)  # 5 more fits' time for 2 workers
    assert kept.value is not None
    assert sum(fit > raised for fit in _SlowFit.fits) <= 2  # at most the ones in flight
    assert len(_SlowFit.fits) <= 6


def test_torch_threads_none_reaches_the_folds_of_pooled_cross_validation(monkeypatch):
    # par44: each parallel fold forced one thread, so torch_threads(None) (torch's own
    # count, within the task's share) gave 1 there while RNNGridSearchCV's stacks got it.
    from skorch.callbacks import Callback

    from sklearn_rnn import torch_threads
    from sklearn_rnn.clinical._evaluation import _fit_predict

    seen = []

    class Probe(Callback):
        def on_epoch_begin(self, net, **kwargs):
            seen.append(torch.get_num_threads())

    rng = np.random.RandomState(0)
    X = [rng.randn(4, 2) for _ in range(12)]
    y = np.array([0, 1] * 6)
    model = RNNClassifier(hidden_size=3, max_iter=1, random_state=0, callbacks=[("probe", Probe())])
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            with torch_threads(None):
                _fit_predict(model, X, y, np.arange(8), np.arange(8, 12), 1, True)
            _fit_predict(model, X, y, np.arange(8), np.arange(8, 12), 1, True)  # no choice: one thread
    finally:
        torch.set_num_threads(before)
    assert seen == [2, 1]


def test_a_fit_in_another_thread_as_a_thread_pool_starts_leaves_new_threads_their_count():
    # par44: the pool read the count another thread's small fit had lowered to 1, and wrote
    # it back for every thread started later, after that fit had restored 2.
    import threading

    from skorch.callbacks import Callback

    def new_thread_count():
        counts = []
        reader = threading.Thread(target=lambda: counts.append(torch.get_num_threads()))
        reader.start()
        reader.join()
        return counts[0]

    rng = np.random.RandomState(0)
    X = [rng.randn(5, 2) for _ in range(8)]
    y = np.array([0, 1] * 4)
    in_fit, pool_in_fit, other_done = threading.Event(), threading.Event(), threading.Event()

    class Hold(Callback):  # the pool's fits wait until the other fit has ended
        def on_epoch_begin(self, net, **kwargs):
            pool_in_fit.set()
            other_done.wait(30)

    class Wait(Callback):  # the other thread's fit ends once the pool's fits run
        def on_epoch_begin(self, net, **kwargs):
            in_fit.set()
            pool_in_fit.wait(30)

    def other_fit():
        RNNClassifier(hidden_size=4, max_iter=1, callbacks=[("w", Wait())]).fit(X, y)
        other_done.set()

    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            other = threading.Thread(target=other_fit)
            other.start()
            in_fit.wait(30)
            joblib.Parallel(n_jobs=2, backend="threading")(
                joblib.delayed(lambda i: RNNClassifier(hidden_size=4, max_iter=1, random_state=i,
                                                       callbacks=[("h", Hold())]).fit(X, y))(i)
                for i in range(2))
            other.join()
        assert new_thread_count() == 2
    finally:
        torch.set_num_threads(before)


def test_integrated_gradients_follow_the_thread_rule():
    # par44: the attribution ran on torch's count (every core) inside torch_threads(1).
    from sklearn_rnn import torch_threads
    from sklearn_rnn.inspection import integrated_gradients

    rng = np.random.RandomState(0)
    X = [rng.randn(6, 2) for _ in range(8)]
    y = np.array([0, 1] * 4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model = RNNClassifier(hidden_size=4, max_iter=1, random_state=0).fit(X, y)
    seen, grad = [], torch.autograd.grad

    def recording(*args, **kwargs):
        seen.append(torch.get_num_threads())
        return grad(*args, **kwargs)

    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        torch.autograd.grad = recording
        with torch_threads(1):
            integrated_gradients(model, X[0], n_steps=8)
    finally:
        torch.autograd.grad = grad
        torch.set_num_threads(before)
    assert set(seen) == {1}


def test_a_training_call_swaps_the_estimators_state_in_one_assignment():
    # par44: staging cleared the estimator's attributes and then refilled them; a predict
    # in another thread between the two met NotFittedError on a fitted estimator.
    class Watched(dict):
        cleared = False

        def clear(self):
            Watched.cleared = True
            super().clear()

    rng = np.random.RandomState(0)
    X = [rng.randn(4, 2) for _ in range(8)]
    y = np.array([0, 1] * 4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model = RNNClassifier(hidden_size=3, max_iter=1, random_state=0).fit(X, y)
        old = Watched(model.__dict__)
        model.__dict__ = old
        model.partial_fit(X, y)
    assert not Watched.cleared and model.__dict__ is not old and "net_" in old  # the old state stays whole
    assert model.n_iter_ == 2


def test_a_thread_started_during_another_threads_fit_gets_its_count_back_after_its_own_fit():
    # diff44: a ThreadPoolExecutor worker started while another thread's small fit had
    # lowered torch's count to 1 read 1 as its own, and put 1 back after its fit, for good.
    import threading
    from concurrent.futures import ThreadPoolExecutor

    from skorch.callbacks import Callback

    rng = np.random.RandomState(0)
    X = [rng.randn(5, 2) for _ in range(8)]
    y = np.array([0, 1] * 4)
    started, other_done = threading.Event(), threading.Event()

    class Hold(Callback):
        def on_epoch_begin(self, net, **kwargs):
            started.set()
            other_done.wait(30)

    def held_fit():
        RNNClassifier(hidden_size=4, max_iter=1, callbacks=[("h", Hold())]).fit(X, y)

    def plain_fit():
        RNNClassifier(hidden_size=4, max_iter=1).fit(X, y)
        other_done.set()

    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            with ThreadPoolExecutor(2) as pool:
                held = pool.submit(held_fit)
                started.wait(30)
                pool.submit(plain_fit).result()  # a worker started while the count is lowered
                held.result()
                barrier = threading.Barrier(2)

                def probe():
                    barrier.wait(30)
                    return torch.get_num_threads()

                counts = [future.result() for future in [pool.submit(probe), pool.submit(probe)]]
    finally:
        torch.set_num_threads(before)
    assert counts == [2, 2]


def test_a_fit_nested_in_a_fit_and_a_threads_own_count_keep_their_counts():
    # diff44b: with another fit running, a predict in a callback of a fit reset the outer
    # fit to torch's count for its remaining epochs, and a thread that set its own count
    # got the other fit's 'before' back.
    from skorch.callbacks import Callback

    rng = np.random.RandomState(0)
    X = [rng.randn(5, 2) for _ in range(8)]
    y = np.array([0, 1] * 4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        other = RNNClassifier(hidden_size=3, max_iter=1, random_state=0).fit(X, y)
    seen = []

    class PredictInside(Callback):
        def on_epoch_end(self, net, **kwargs):
            other.predict(X)
            seen.append(torch.get_num_threads())

    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            RNNClassifier(hidden_size=3, max_iter=3, random_state=0, early_stopping=False,
                          callbacks=[("p", PredictInside())]).fit(X, y)
        assert seen == [1, 1, 1] and torch.get_num_threads() == 2
        torch.set_num_threads(3)  # this thread's own choice, kept after a fit
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            RNNClassifier(hidden_size=3, max_iter=1, random_state=0).fit(X, y)
        assert torch.get_num_threads() == 3
    finally:
        torch.set_num_threads(before)
