"""Threads of a fit and a prediction: one for small networks by default, restored afterwards."""

import warnings

import numpy as np
import pytest
import torch
from sklearn.exceptions import ConvergenceWarning

from sklearn_rnn import RNNClassifier, torch_threads
from sklearn_rnn._parallel import SMALL_WORK, fit_threads
from sklearn_rnn.nn import RecurrentNetwork


def readme_task():
    """The data of the README's "Ten lines" snippet."""
    rng = np.random.default_rng(0)
    X = [rng.normal(size=(rng.integers(3, 30), 4)) for _ in range(200)]
    return X, np.array([int(x[:, 0].sum() > 0) for x in X])


@pytest.fixture
def two_threads():
    """torch at two intra-op threads (torch's default on the 2-core machine)."""
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(before)


def record_threads(monkeypatch, owner, name):
    """The torch thread counts in force whenever ``owner.name`` runs (a list that grows)."""
    seen = []
    method = getattr(owner, name)

    def recording(self, *args, **kwargs):
        seen.append(torch.get_num_threads())
        return method(self, *args, **kwargs)

    monkeypatch.setattr(owner, name, recording)
    return seen


@pytest.fixture
def threads_seen(monkeypatch):
    """The torch thread counts in force whenever the network runs forward."""
    return record_threads(monkeypatch, RecurrentNetwork, "forward")


def fit_and_predict(model, X, y):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model.fit(X, y)
    model.predict_proba(X)
    return model


def test_readme_model_runs_on_one_thread_by_default(two_threads, threads_seen):
    X, y = readme_task()
    model = RNNClassifier(max_iter=2, random_state=0)
    fit_and_predict(model, X, y)
    assert threads_seen and set(threads_seen) == {1}
    assert torch.get_num_threads() == 2  # the caller's setting is back


def test_readme_model_with_threads_chosen(two_threads, threads_seen):
    X, y = readme_task()
    with torch_threads(2):
        fit_and_predict(RNNClassifier(max_iter=2, random_state=0), X, y)
    assert set(threads_seen) == {2}
    threads_seen.clear()
    torch.set_num_threads(1)
    with torch_threads(None):  # torch's own setting
        fit_and_predict(RNNClassifier(max_iter=2, random_state=0), X, y)
    assert set(threads_seen) == {1}


def test_one_thread_gives_the_same_model(two_threads):
    X, y = readme_task()
    default = fit_and_predict(RNNClassifier(max_iter=2, random_state=0), X, y)
    with torch_threads(1):
        single = fit_and_predict(RNNClassifier(max_iter=2, random_state=0), X, y)
    np.testing.assert_array_equal(default.predict_proba(X), single.predict_proba(X))


def test_large_networks_keep_torchs_setting():
    assert fit_threads(hidden_size=50, batch_size=32) == 1
    hidden = int(np.ceil(np.sqrt(SMALL_WORK / 64)))
    assert fit_threads(hidden_size=hidden, batch_size=64) is None
    with torch_threads(3):
        assert fit_threads(hidden_size=50, batch_size=32) == 3


@pytest.mark.parametrize("bad", [0, -1, 1.5, "2", True])
def test_bad_thread_counts_are_refused(bad):
    with pytest.raises(ValueError, match="positive integer or None"):
        with torch_threads(bad):
            pass


def test_stacked_training_follows_the_thread_rule_of_fit(two_threads, monkeypatch):
    # RNNGridSearchCV and StackedStream trained on torch's own setting, ignoring the
    # one-thread default and torch_threads(n).
    from sklearn_rnn import RNNGridSearchCV
    from sklearn_rnn._stacked import StackedStream, _Stack

    seen = record_threads(monkeypatch, _Stack, "_train_epoch")
    X, y = readme_task()
    search = RNNGridSearchCV(RNNClassifier(hidden_size=8, max_iter=2, random_state=0),
                             {"spectral_radius": [0.9, 1.2]}, cv=2, refit=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        search.fit(X, y)
        assert seen and set(seen) == {1} and torch.get_num_threads() == 2
        seen.clear()
        with torch_threads(np.int64(2)):  # a numpy integer was refused
            search.fit(X, y)
        assert set(seen) == {2}
        seen.clear()
        models = [RNNClassifier(hidden_size=8, random_state=seed).partial_fit(X[:20], y[:20], classes=[0, 1])
                  for seed in (0, 1)]
        StackedStream(models).update([(X[:20], y[:20])] * 2)
    assert set(seen) == {1} and torch.get_num_threads() == 2


def test_a_search_in_threads_leaves_its_callers_thread_count():
    # In a fresh process whose main thread never set torch's count, a task thread's
    # set_num_threads(1) set it for the process: the caller was left on one thread.
    import subprocess
    import sys
    import textwrap

    script = textwrap.dedent("""
        import warnings; warnings.simplefilter("ignore")
        import joblib, numpy as np, torch
        from sklearn.model_selection import GridSearchCV
        from sklearn_rnn import RNNRegressor
        rng = np.random.default_rng(0)
        X = [rng.normal(size=(4, 2)) for _ in range(20)]; y = rng.normal(size=20)
        with joblib.parallel_backend("threading"):
            GridSearchCV(RNNRegressor(max_iter=1, hidden_size=4), {"clip_threshold": [1.0, 2.0]},
                         cv=2, n_jobs=2, refit=False).fit(X, y)
        # A pool whose threads are reused across calls: a thread left lowered by one
        # call was the first of the next and its count was taken for the caller's.
        fit = lambda seed: RNNRegressor(max_iter=1, hidden_size=4, random_state=seed).fit(X, y)
        with joblib.Parallel(n_jobs=2, backend="threading") as parallel:
            for _ in range(3):
                parallel(joblib.delayed(fit)(seed) for seed in range(4))
        print(torch.get_num_threads())
    """)
    env = {k: v for k, v in __import__("os").environ.items() if k != "OMP_NUM_THREADS"}
    run = lambda code: subprocess.run([sys.executable, "-c", code], capture_output=True,  # noqa: E731
                                      text=True, env=env, check=True).stdout.strip()
    fresh = run("import torch; print(torch.get_num_threads())")
    assert run(script) == fresh  # 1 against 2 on two cores before


def test_a_pool_thread_started_while_another_task_runs_restores_the_count_before_the_pool():
    # On a 16-core GPU machine the search above left its caller on 1 thread of 16: a pool
    # thread whose first task began while another task held the count lowered read that
    # lowered count as its own (a fresh thread's first reading is the last count set in
    # the process), kept it after its task, and, first to start in the next call, handed
    # it on as the count to restore. The same order of events, forced with two threads.
    import subprocess
    import sys
    import textwrap

    script = textwrap.dedent("""
        import queue, threading, torch
        import sklearn_rnn._parallel as parallel
        parallel._in_joblib_task = lambda: True  # the two threads stand for a joblib pool's
        def worker(jobs):
            for job in iter(jobs.get, None):
                job()
        a_in, a_out, b_done = threading.Event(), threading.Event(), threading.Event()
        def task_a():
            with parallel._task_share():
                a_in.set(); a_out.wait()
        def task_b():
            with parallel._task_share():
                pass
            b_done.set()
        qa, qb = queue.Queue(), queue.Queue()
        ta, tb = (threading.Thread(target=worker, args=(q,)) for q in (qa, qb))
        ta.start(); tb.start()
        qa.put(task_a); a_in.wait()
        qb.put(task_b); b_done.wait(); b_done.clear()  # B starts while A holds the count lowered
        a_out.set()
        done = threading.Event(); qa.put(done.set); done.wait()
        qb.put(task_b); b_done.wait()  # the next call's only task runs on B
        qa.put(None); qb.put(None); ta.join(); tb.join()
        print(torch.get_num_threads())
    """)
    env = {k: v for k, v in __import__("os").environ.items() if k != "OMP_NUM_THREADS"}
    run = lambda code: subprocess.run([sys.executable, "-c", code], capture_output=True,  # noqa: E731
                                      text=True, env=env, check=True).stdout.strip()
    fresh = run("import torch; print(torch.get_num_threads())")
    if fresh == "1":
        pytest.skip("torch runs one thread here: a lowered count cannot be told from it")
    assert run(script) == fresh  # 1 against 2 on two cores before


def test_numpy_integer_sizes_get_the_thread_rule(two_threads, threads_seen):
    # isinstance(np.int64(8), int) is False: the fit ran on every core, unlimited in a pool.
    X, y = readme_task()
    fit_and_predict(RNNClassifier(hidden_size=np.int64(8), batch_size=np.int64(32), max_iter=2), X, y)
    assert threads_seen and set(threads_seen) == {1}
