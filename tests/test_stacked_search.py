"""The stacked trainer and RNNGridSearchCV: each stacked network is the network its own fit trains."""

import warnings
from collections import Counter

import numpy as np
import pytest
import torch
from sklearn.base import BaseEstimator, clone
from sklearn.exceptions import ConvergenceWarning, FitFailedWarning
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GridSearchCV, StratifiedKFold
from sklearn.pipeline import make_pipeline

from sklearn_rnn import RNNClassifier, RNNGridSearchCV, RNNRegressor, SequenceStandardScaler
from sklearn_rnn._stacked import StackedMember, check_stackable, train_stacked
from sklearn_rnn.nn import RecurrentNetwork


def visits(n, seed=0):
    """Visit histories with times in column 0 and one feature, labels from the last visit."""
    rng = np.random.default_rng(seed)
    X = [np.c_[np.cumsum(rng.uniform(1, 3, k)), rng.normal(size=k)] for k in rng.integers(2, 8, n)]
    y = np.array([int(x[-1, 1] + 0.3 * x[0, 1] > 0) for x in X])
    return X, y


def explicit(estimator=RNNClassifier, **changes):
    """Every setting that matters set explicitly (the defaults may change)."""
    params = dict(
        cell="decay", time_feature=0, hidden_size=6, num_layers=1, optimizer="sgd",
        learning_rate=0.05, clip_threshold=0.5, batch_size=16, max_iter=5,
        early_stopping=False, n_iter_no_change=3, tol=1e-3, alpha=1.0, spectral_radius=1.2,
        readout="last", device="cpu", random_state=0,
    )
    params.update(changes)
    return estimator(**params)


def largest_difference(a, b):
    return max(
        float((p - q).detach().abs().max()) for p, q in zip(a.module_.parameters(), b.module_.parameters()) if p.numel()
    )


def stack_and_fit(models, datasets, sample_weight=None):
    """Train clones of ``models`` stacked, fit the same clones one by one (each with
    ``sample_weight``, if given); return both."""
    stacked, alone = [clone(m) for m in models], [clone(m) for m in models]
    members = []
    for model, (X, y) in zip(stacked, datasets):
        members.append(StackedMember(model, *model._prepare(X, y, sample_weight, incremental=False)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        train_stacked(members)
        for model, (X, y) in zip(alone, datasets):
            model.fit(X, y, sample_weight=sample_weight)
    return stacked, alone


@pytest.mark.parametrize("optimizer, tolerance, readout", [
    ("sgd", 1e-6, "last"), ("adam", 2e-4, "last"), ("sgd", 1e-6, "pool"),
])
@pytest.mark.parametrize("early_stopping", [False, True])
def test_each_stacked_network_matches_its_own_fit(optimizer, tolerance, readout, early_stopping):
    # Settings, seeds and training sets (folds of different sizes) differ per network;
    # with tol=0.01 the stopping rule ends some networks before others.
    X, y = visits(90)
    models, datasets = [], []
    for index, (radius, tau, seed) in enumerate([(0.9, 0.5, 0), (1.2, 0.5, 1), (1.2, 5.0, 0), (1.5, 0.1, 2)]):
        models.append(explicit(optimizer=optimizer, spectral_radius=radius, clip_threshold=tau,
                               random_state=seed, max_iter=30, tol=0.01, early_stopping=early_stopping,
                               readout=readout))
        datasets.append((X[: 70 + 5 * index], y[: 70 + 5 * index]))
    stacked, alone = stack_and_fit(models, datasets)
    for a, b in zip(stacked, alone):
        assert a.n_iter_ == b.n_iter_
        assert largest_difference(a, b) < tolerance
        np.testing.assert_allclose(a.loss_curve_, b.loss_curve_, atol=tolerance)
        # The history records what fit's records: every epoch's batches and their sizes,
        # the epoch means with skorch's *_best flags.
        sizes = [[[batch["train_batch_size"] for batch in epoch["batches"] if "train_batch_size" in batch]
                  for epoch in m.net_.history]
                 for m in (a, b)]
        assert sizes[0] == sizes[1]
        assert {"train_loss", "train_loss_best"} <= set(a.net_.history[-1]) <= set(b.net_.history[-1])
        # skorch's idioms read them (history[:, 'valid_loss_best'] was a KeyError).
        assert {"dur", *(("valid_loss_best", "valid_score_best") if early_stopping else ())} <= set(a.net_.history[-1])
        if early_stopping and optimizer == "sgd":
            assert a.net_.history[:, "valid_loss_best"] == b.net_.history[:, "valid_loss_best"]
        # Adam's moments and step counts too, so that training goes on as after fit (the
        # stack kept them to itself: a partial_fit after it restarted Adam from zero).
        for p, q in zip(a.net_.module_.parameters(), b.net_.module_.parameters()):
            kept, fitted = a.net_.optimizer_.state.get(p), b.net_.optimizer_.state.get(q)
            assert (kept is None) == (fitted is None)
            if kept:
                assert float(kept["step"]) == float(fitted["step"])
                torch.testing.assert_close(kept["exp_avg"], fitted["exp_avg"], atol=tolerance, rtol=0)
        if early_stopping:
            assert a.best_validation_loss_ == pytest.approx(b.best_validation_loss_, abs=tolerance)
            assert a.validation_scores_ == pytest.approx(b.validation_scores_, abs=1e-9)
        np.testing.assert_allclose(a.predict_proba(X), b.predict_proba(X), atol=10 * tolerance)
    assert len({a.n_iter_ for a in stacked}) > 1 or early_stopping  # some stop earlier


@pytest.mark.parametrize("readout", ["last", "pool"])
@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
@pytest.mark.parametrize("cell", ["tanh", "relu", "gru", "lstm"])
def test_each_stacked_network_of_a_fused_cell_matches_its_own_fit(cell, optimizer, readout, monkeypatch):
    """The Elman, GRU and LSTM cells stack through their step loop in plain tensor
    operations (Cell.forward_vectorizable); fit keeps the fused kernel."""
    X, y = visits(70)
    models, datasets = [], []
    for index, (radius, tau, seed) in enumerate([(0.9, 0.5, 0), (1.2, 5.0, 1), (1.5, 0.1, 2)]):
        models.append(explicit(cell=cell, optimizer=optimizer, spectral_radius=radius, clip_threshold=tau,
                               random_state=seed, max_iter=8, tol=0.01, readout=readout))
        datasets.append((X[: 55 + 5 * index], y[: 55 + 5 * index]))
    stacked, alone = stack_and_fit(models, datasets)
    assert not any(model.module_.vectorizable for model in stacked + alone)  # the switch stays off
    for a, b in zip(stacked, alone):
        assert a.n_iter_ == b.n_iter_
        if optimizer == "sgd":
            # The fused kernel and the step loop differ by float32 rounding only.
            assert largest_difference(a, b) < 1e-6
            np.testing.assert_allclose(a.loss_curve_, b.loss_curve_, atol=1e-6)
            np.testing.assert_allclose(a.predict_proba(X), b.predict_proba(X), atol=1e-5)
    if optimizer == "adam":
        # Adam divides by the root of the running squared gradient, so a rounding
        # difference of 1e-9 between the fused kernel and the step loop in a gradient
        # entry of 1e-6 changes that weight's step by about lr * 1e-3. Against the
        # same fit with the network's step loop switched on, what remains is the stack's
        # own rounding (batched products), within the 'decay' cell's tolerance.
        monkeypatch.setattr(RecurrentNetwork, "vectorizable", True)
        looped = [clone(model).fit(X_, y_) for model, (X_, y_) in zip(models, datasets)]
        monkeypatch.undo()
        for a, b, c in zip(stacked, looped, alone):
            assert a.n_iter_ == b.n_iter_
            assert largest_difference(a, b) < 2e-4
            np.testing.assert_allclose(a.loss_curve_, b.loss_curve_, atol=2e-4)
            np.testing.assert_allclose(a.loss_curve_, c.loss_curve_, atol=1e-2)


@pytest.mark.parametrize("cell", ["tanh", "lstm", "decay"])
def test_stacked_layers_and_learned_initial_states_match_their_own_fit(cell):
    X, y = visits(60)
    learned = "zero" if cell == "decay" else "learned"
    models = [explicit(cell=cell, num_layers=2, hidden_init=learned, spectral_radius=radius, random_state=seed)
              for radius, seed in ((0.9, 0), (1.2, 1))]
    stacked, alone = stack_and_fit(models, [(X, y)] * 2)
    for a, b in zip(stacked, alone):
        assert a.n_iter_ == b.n_iter_
        assert largest_difference(a, b) < 1e-6


@pytest.mark.parametrize("cell, num_layers, hidden_init", [
    ("tanh", 1, "zero"), ("relu", 1, "zero"), ("gru", 1, "zero"), ("lstm", 1, "zero"),
    ("tanh", 2, "learned"), ("lstm", 2, "learned"),
])
def test_each_stacked_simplex_network_matches_its_own_fit(cell, num_layers, hidden_init):
    """optimizer='simplex': the deltas of all networks in one backward pass, then each
    network's temporal gradients, simplex direction (its own random stream) and step."""
    X, y = visits(70)
    models, datasets = [], []
    for index, (radius, tau, seed) in enumerate([(0.9, 0.5, 0), (1.2, 5.0, 1), (1.5, 0.1, 2)]):
        models.append(explicit(cell=cell, optimizer="simplex", spectral_radius=radius, clip_threshold=tau,
                               random_state=seed, max_iter=6, tol=0.01, num_layers=num_layers,
                               hidden_init=hidden_init, switch_threshold=None if index else 0.5))
        datasets.append((X[: 55 + 5 * index], y[: 55 + 5 * index]))
    stacked, alone = stack_and_fit(models, datasets)
    for model, a, b, (X_, y_) in zip(models, stacked, alone, datasets):
        assert a.n_iter_ == b.n_iter_
        assert a.branch_counts_ == b.branch_counts_ and a.branch_counts_["simplex"] > 0
        assert largest_difference(a, b) < 1e-6
        np.testing.assert_allclose(a.loss_curve_, b.loss_curve_, atol=1e-6)
        start = clone(model)
        start._prepare(X_, y_, None, incremental=False)  # the initial weights
        moved = max(float((p - q).detach().abs().max())
                    for p, q in zip(a.module_.parameters(), start.net_.module_.parameters()) if p.numel())
        stop, stacked_stop = dict(b.net_.callbacks_)["stop"], dict(a.net_.callbacks_)["stop"]
        assert (stacked_stop.best_epoch_, stacked_stop.kept_start_) == (stop.best_epoch_, stop.kept_start_)
        if (stop.best_epoch_, stop.kept_start_) == (1, True):
            # The first epoch's start, the initial weights, had the lowest training-set loss.
            assert moved == 0
        else:
            assert moved > 1e-3  # it trained


@pytest.mark.parametrize("cell", ["tanh", "lstm"])
def test_batched_simplex_rule_gives_each_network_its_own_steps(cell):
    """The simplex update of all stacked networks at once (their temporal gradients,
    directions and clipped steps as (M, ...) tensors) leaves each network with the
    weights and optimizer state its own per-model SimplexSGD.step gives it: networks
    with different batch sizes, sequence lengths, learning rates, switching and
    clipping thresholds, after several updates."""
    settings = [  # batch size, longest sequence, mu, tau, psi, seed
        (8, 4, 0.05, 0.2, 0.3, 0), (16, 9, 0.1, 5.0, None, 1), (12, 6, 0.02, 1.0, 0.05, 2), (16, 3, 0.05, None, 1.0, 3),
    ]
    models, datasets = [], []
    for batch, longest, mu, tau, psi, seed in settings:
        rng = np.random.default_rng(seed)
        X = [np.c_[np.cumsum(rng.uniform(1, 3, k)), rng.normal(size=k)] for k in rng.integers(1, longest + 1, 40)]
        y = np.array([int(x[-1, 1] > 0) for x in X])
        models.append(explicit(cell=cell, optimizer="simplex", batch_size=batch, learning_rate=mu, clip_threshold=tau,
                               switch_threshold=psi, random_state=seed, max_iter=3, spectral_radius=1.1))
        datasets.append((X, y))
    stacked, alone = stack_and_fit(models, datasets)
    branches = set()
    for a, b in zip(stacked, alone):
        assert a.n_iter_ == b.n_iter_ == 3
        assert largest_difference(a, b) < 1e-6
        opt_a, opt_b = a.net_.optimizer_, b.net_.optimizer_
        assert opt_a.branch_counts == opt_b.branch_counts
        assert sum(opt_a.branch_counts.values()) == 3 * -(-40 // a.batch_size)  # one record per update
        # as many convex weights drawn, from each network's own stream
        assert torch.equal(opt_a.generator.get_state(), opt_b.generator.get_state())
        assert opt_a.last_step["branch"] == opt_b.last_step["branch"]
        for key in ("gradient_norm", "cosine", "step_size"):
            np.testing.assert_allclose(opt_a.last_step[key], opt_b.last_step[key], rtol=1e-4)
        branches |= {name for name, count in opt_a.branch_counts.items() if count}
    assert {"simplex", "switched"} <= branches  # both sides of the switching threshold are exercised


def test_stacked_regressor_and_chunks():
    X, _ = visits(60)
    y = np.array([x[:, 1].sum() for x in X])
    models = [explicit(RNNRegressor, spectral_radius=radius, random_state=seed)
              for radius in (0.9, 1.2) for seed in (0, 1)]
    stacked, alone = stack_and_fit(models, [(X, y)] * 4)
    for a, b in zip(stacked, alone):
        assert largest_difference(a, b) < 1e-6
    # One network per chunk trains each network the same way.
    members = []
    for model in (clone(m) for m in models):
        members.append(StackedMember(model, *model._prepare(X, y, None, incremental=False)))
    train_stacked(members, max_stacked=1)
    for member, b in zip(members, alone):
        assert largest_difference(member.estimator, b) < 1e-6


def test_search_agrees_with_gridsearchcv():
    X, y = visits(60, seed=1)
    pipeline = make_pipeline(SequenceStandardScaler(), explicit(optimizer="adam", learning_rate=0.01, max_iter=10))
    grid = {"rnnclassifier__spectral_radius": [0.9, 1.2], "rnnclassifier__clip_threshold": [1.0, 5.0]}
    cv = StratifiedKFold(3, shuffle=True, random_state=0)
    ours = RNNGridSearchCV(pipeline, grid, scoring="roc_auc", cv=cv, return_train_score=True).fit(X, y)
    theirs = GridSearchCV(pipeline, grid, scoring="roc_auc", cv=cv, return_train_score=True).fit(X, y)
    assert set(ours.cv_results_) == set(theirs.cv_results_)
    for key, value in theirs.cv_results_.items():
        if key.endswith("_score") and not key.startswith("rank"):
            np.testing.assert_allclose(ours.cv_results_[key], value, atol=0.005)
    assert ours.cv_results_["params"] == theirs.cv_results_["params"]
    radius = "param_rnnclassifier__spectral_radius"
    assert ours.cv_results_[radius].dtype == theirs.cv_results_[radius].dtype
    np.testing.assert_array_equal(ours.cv_results_[radius], theirs.cv_results_[radius])
    assert ours.best_params_ == theirs.best_params_
    assert ours.best_score_ == pytest.approx(theirs.best_score_, abs=0.005)
    assert ours.n_splits_ == 3 and ours.best_index_ == theirs.best_index_
    # The refit is the ordinary fit of the best setting on all the data.
    np.testing.assert_array_equal(ours.predict_proba(X), theirs.predict_proba(X))
    np.testing.assert_array_equal(ours.classes_, [0, 1])
    assert ours.score(X, y) == pytest.approx(theirs.score(X, y))


def test_a_search_over_label_smoothing_trains_each_value_with_its_own_loss():
    # One criterion runs a whole stack: the two values form two groups, so each network
    # is trained with its own smoothing, as GridSearchCV trains it.
    X, y = visits(60, seed=1)
    pipeline = make_pipeline(SequenceStandardScaler(), explicit(optimizer="adam", learning_rate=0.05, max_iter=20))
    grid = {"rnnclassifier__label_smoothing": [0.0, 0.3]}
    cv = StratifiedKFold(3, shuffle=True, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        ours = RNNGridSearchCV(pipeline, grid, scoring="neg_log_loss", cv=cv, refit=False).fit(X, y)
        theirs = GridSearchCV(pipeline, grid, scoring="neg_log_loss", cv=cv, refit=False).fit(X, y)
    np.testing.assert_allclose(ours.cv_results_["mean_test_score"], theirs.cv_results_["mean_test_score"], atol=1e-3)
    assert abs(np.diff(ours.cv_results_["mean_test_score"])[0]) > 0.01  # the two losses differ


@pytest.mark.parametrize("optimizer", ["sgd", "adam", "simplex"])
def test_search_of_the_thesis_cell_agrees_with_gridsearchcv(optimizer):
    """cell='tanh' (the thesis' configuration: 'sgd', the clipped step rule, or 'simplex')."""
    X, y = visits(60, seed=2)
    rnn = explicit(cell="tanh", time_feature=None, optimizer=optimizer, max_iter=10,
                   learning_rate=0.01 if optimizer == "adam" else 0.05)
    pipeline = make_pipeline(SequenceStandardScaler(), rnn)
    grid = {"rnnclassifier__spectral_radius": [0.9, 1.2], "rnnclassifier__clip_threshold": [0.5, 5.0]}
    cv = StratifiedKFold(3, shuffle=True, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        ours = RNNGridSearchCV(pipeline, grid, scoring="roc_auc", cv=cv, refit=False).fit(X, y)
        theirs = GridSearchCV(pipeline, grid, scoring="roc_auc", cv=cv, refit=False).fit(X, y)
    for key, value in theirs.cv_results_.items():
        if key.endswith("_score") and not key.startswith("rank"):
            np.testing.assert_allclose(ours.cv_results_[key], value, atol=0.005)
    assert ours.best_params_ == theirs.best_params_
    assert len(set(np.round(ours.cv_results_["mean_test_score"], 6))) > 1  # the settings differ


def test_two_jobs_train_the_same_networks():
    X, y = visits(40)
    grid = {"spectral_radius": [0.9, 1.2], "random_state": [0, 1]}
    common = dict(scoring="roc_auc", cv=2, refit=False)
    one = RNNGridSearchCV(explicit(max_iter=3), grid, **common).fit(X, y)
    two = RNNGridSearchCV(explicit(max_iter=3), grid, n_jobs=2, **common).fit(X, y)
    np.testing.assert_allclose(one.cv_results_["split1_test_score"], two.cv_results_["split1_test_score"])
    np.testing.assert_allclose(one.cv_results_["mean_test_score"], two.cv_results_["mean_test_score"])


@pytest.mark.parametrize("n_jobs", [0, 1.5])
def test_n_jobs_without_meaning_is_refused_before_any_network_is_built(n_jobs, monkeypatch):
    # 0 passed the check and was refused by joblib ("n_jobs == 0 in Parallel has no
    # meaning"), naming no parameter, after every network had been built.
    from sklearn.utils._param_validation import InvalidParameterError

    import sklearn_rnn.model_selection as model_selection

    def prepare(*args, **kwargs):
        raise AssertionError("the networks were built before n_jobs was checked")

    monkeypatch.setattr(model_selection.RNNGridSearchCV, "_prepare", prepare)
    X, y = visits(20)
    search = RNNGridSearchCV(explicit(max_iter=1), {"spectral_radius": [0.9, 1.2]}, cv=2, n_jobs=n_jobs)
    with pytest.raises(InvalidParameterError, match=rf"'n_jobs' parameter of RNNGridSearchCV must be .*"
                                                    rf"\[1, inf\) or None. Got {n_jobs!r} instead"):
        search.fit(X, y)


@pytest.mark.parametrize("n_jobs, grid, chunks, bound", [
    (None, {"spectral_radius": [0.8, 0.9, 1.0, 1.1, 1.2, 1.3]}, [4, 4, 4, 4, 2], 4),
    (2, {"spectral_radius": [0.8, 0.9, 1.0, 1.1, 1.2, 1.3]}, [4, 4, 4, 4, 2], 8),  # two chunks at a time
    (2, {"spectral_radius": [0.8, 0.9]}, [3, 3], 6),  # at least n_jobs chunks
    # Two architectures in turn: at most max_stacked of each.
    (None, {"alpha": [0.0, 1.0, 2.0], "hidden_size": [4, 6]}, [4, 4, 4, 4, 1, 1], 8),
])
def test_a_search_holds_at_most_max_stacked_prepared_networks_at_a_time(n_jobs, grid, chunks, bound, monkeypatch):
    # Every (setting, split) network was prepared, with its own encoded copy of its
    # training and validation split, before the first one trained: memory grew with the
    # grid whatever max_stacked said (650 MB for 48 settings x 4 splits of 400 sequences
    # of 300 steps, max_stacked=1). The chunks are those train_stacked cuts.
    import gc

    from joblib import parallel_backend

    from sklearn_rnn._stacked import _Stack
    from sklearn_rnn.sequences import SequenceDataset

    def prepared():  # networks with their data, and encoded datasets (training + validation)
        gc.collect()
        objects = gc.get_objects()
        return (sum(type(o) is StackedMember and o.train is not None for o in objects),
                sum(type(o) is SequenceDataset for o in objects) / 2)

    X, y = visits(60)
    trained, held = [], []
    stack = _Stack.__init__
    before = prepared()  # whatever other tests left

    def counting(self, members):
        held.extend(now - then for now, then in zip(prepared(), before))
        trained.append(len(members))
        stack(self, members)

    monkeypatch.setattr(_Stack, "__init__", counting)
    model = explicit(max_iter=2, early_stopping=True, validation_fraction=0.2)
    with warnings.catch_warnings(), parallel_backend("threading", n_jobs=n_jobs or 1):
        warnings.simplefilter("ignore", ConvergenceWarning)
        RNNGridSearchCV(model, grid, cv=3, max_stacked=4, n_jobs=n_jobs, refit=False).fit(X, y)
    assert sorted(trained, reverse=True) == chunks
    assert max(held) <= bound


def test_search_without_refit_has_no_predict():
    X, y = visits(30)
    search = RNNGridSearchCV(explicit(max_iter=2), {"spectral_radius": [1.0]}, cv=2, refit=False).fit(X, y)
    assert not hasattr(search, "best_estimator_")
    assert search.cv_results_["mean_test_score"].shape == (1,)
    with pytest.raises(AttributeError, match="predict"):
        search.predict(X)


def test_a_failed_refit_leaves_no_model_of_an_earlier_search():
    # The earlier search's fitted best_estimator_ survived a refit that raised, and
    # predict used it beside the new best_params_; GridSearchCV's raises NotFittedError.
    from sklearn.exceptions import NotFittedError
    from sklearn.model_selection import KFold

    X, y = visits(30)
    search = RNNGridSearchCV(explicit(max_iter=2), {"spectral_radius": [0.9, 1.2]}, cv=3).fit(X, y)
    first = search.best_estimator_
    search.set_params(param_grid={"spectral_radius": [0.5, 2.0]}, cv=list(KFold(3).split(X)))
    decreasing = np.array([[5.0, 0.1], [1.0, 0.2]])  # in no split: only the refit reads it
    with pytest.raises(ValueError, match="decrease"):
        search.fit(X + [decreasing], np.r_[y, 0])
    assert search.best_params_ == {"spectral_radius": 0.5}
    assert search.best_estimator_ is not first
    with pytest.raises(NotFittedError):
        search.predict_proba(X[:2])


@pytest.mark.parametrize(
    "changes, match",
    [
        ({"cell": "tanh", "optimizer": "simplex", "dropout": 0.2}, "dropout"),
        ({"dropout": 0.2}, "dropout"),
        ({"cell": "gru", "num_layers": 2, "dropout": 0.2}, "dropout"),
        ({"precision": "bfloat16"}, "precision"),
    ],
)
def test_refuses_what_it_cannot_stack(changes, match):
    with pytest.raises(ValueError, match=match):
        check_stackable(explicit(**changes))
    X, y = visits(20)
    search = RNNGridSearchCV(explicit(), {"spectral_radius": [0.9], **{k: [v] for k, v in changes.items()}}, cv=2)
    with pytest.raises(ValueError, match="GridSearchCV"):
        search.fit(X, y)


@pytest.mark.parametrize("name, value", [
    ("max_iter", -2), ("optimizer", "foo"), ("alpha", -1.0), ("tol", -1.0),
    ("clip_threshold", -1.0), ("hidden_size", 2.5), ("hidden_size", 0), ("batch_size", 0),
    ("label_smoothing", 2.0), ("learning_rate", -1.0),
])
@pytest.mark.parametrize("pipeline", [False, True])
def test_every_setting_is_validated_as_fit_validates_it(name, value, pipeline):
    # The members were prepared without fit's checks: max_iter=-2, a negative L2
    # penalty or optimizer='foo' were trained and scored.
    from sklearn.utils._param_validation import InvalidParameterError

    X, y = visits(20)
    estimator = explicit()
    prefix = ""
    if pipeline:
        estimator, prefix = make_pipeline(SequenceStandardScaler(), estimator), "rnnclassifier__"
    search = RNNGridSearchCV(estimator, {f"{prefix}{name}": [value]}, cv=2, refit=False,
                             error_score="raise")
    with pytest.raises(InvalidParameterError, match=f"The '{name}' parameter of RNNClassifier"):
        search.fit(X, y)
    assert not hasattr(search, "cv_results_")
    # With a numeric error_score the setting's networks fail, as GridSearchCV's fits do:
    # a grid of that setting alone has nothing to score.
    search.set_params(error_score=np.nan)
    with pytest.raises(ValueError, match=f"(?s)All the 2 networks failed.*The '{name}' parameter"):
        search.fit(X, y)


def test_an_invalid_setting_among_valid_ones_scores_error_score_as_in_grid_search_cv():
    # It stopped the whole search before any work; GridSearchCV scores it NaN and goes on.
    X, y = visits(40)
    for grid in ({"hidden_size": [4, 0]}, [{"hidden_size": [4]}, {"optimizer": ["foo"]}]):
        ours = RNNGridSearchCV(explicit(), grid, cv=2)
        theirs = GridSearchCV(explicit(), grid, cv=2)
        with pytest.warns(FitFailedWarning, match="2 of the 4 networks failed"):
            ours.fit(X, y)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FitFailedWarning)
            theirs.fit(X, y)
        np.testing.assert_allclose(ours.cv_results_["mean_test_score"],
                                   theirs.cv_results_["mean_test_score"], atol=1e-6)
        assert np.isnan(ours.cv_results_["mean_test_score"][1])
        assert ours.best_params_ == theirs.best_params_ == {"hidden_size": 4}
    # An unknown name is an error of the grid, raised by both before any score.
    with pytest.raises(ValueError, match="Invalid parameter 'no_such_parameter'"):
        RNNGridSearchCV(explicit(), [{"hidden_size": [4]}, {"no_such_parameter": [1]}], cv=2).fit(X, y)


def test_the_grids_values_are_cloned_for_every_network_as_grid_search_cv_clones_them():
    # A RandomState in the grid was shared by every split (each drew another seed) and
    # by the refit; an estimator in the grid was one object trained for every split.
    X, y = visits(45, seed=3)
    for grid in ({"random_state": [np.random.RandomState(0)], "spectral_radius": [0.9, 1.2]},):
        ours = RNNGridSearchCV(explicit(), grid, cv=3, scoring="neg_log_loss").fit(X, y)
        theirs = GridSearchCV(explicit(), grid, cv=3, scoring="neg_log_loss").fit(X, y)
        np.testing.assert_allclose(ours.cv_results_["mean_test_score"],
                                   theirs.cv_results_["mean_test_score"], atol=1e-5)
        np.testing.assert_allclose(ours.predict_proba(X), theirs.predict_proba(X), atol=1e-5)
        untouched = np.random.RandomState(0).get_state()
        assert grid["random_state"][0].get_state()[2] == untouched[2]  # the user's generator
        np.testing.assert_array_equal(grid["random_state"][0].get_state()[1], untouched[1])
    pipeline = make_pipeline(SequenceStandardScaler(), explicit())
    steps = [explicit(spectral_radius=0.9), explicit()]
    grid = {"rnnclassifier": steps}
    ours = RNNGridSearchCV(pipeline, grid, cv=3, scoring="neg_log_loss", refit=False).fit(X, y)
    theirs = GridSearchCV(pipeline, grid, cv=3, scoring="neg_log_loss", refit=False).fit(X, y)
    np.testing.assert_allclose(ours.cv_results_["mean_test_score"],
                               theirs.cv_results_["mean_test_score"], atol=1e-5)
    assert not any(hasattr(step, "net_") for step in steps)  # the grid's own objects unfitted


def test_refuses_a_training_callback_it_would_skip():
    from skorch.callbacks import Callback

    X, y = visits(20)
    model = explicit()
    member = StackedMember(model, *model._prepare(X, y, None, incremental=False))
    model.net_.callbacks_.append(("mine", Callback()))
    with pytest.raises(ValueError, match="callback 'mine'"):
        train_stacked([member])


def test_refuses_other_estimators():
    X, y = visits(20)
    with pytest.raises(TypeError, match="RNNClassifier or RNNRegressor"):
        RNNGridSearchCV(LogisticRegression(), {"C": [1.0]}).fit(np.ones((20, 2)), y)


def test_a_missing_y_is_refused_before_any_work():
    # fit(X, None) split the data and failed while preparing the first network:
    # "'NoneType' object is not subscriptable".
    from sklearn.model_selection import KFold

    class NoSplit(KFold):
        def split(self, X_, y_=None, groups=None):
            raise AssertionError("split the data without y")

    X, _ = visits(20)
    with pytest.raises(ValueError, match=r"RNNClassifier requires y to be passed, but the target y is None"):
        RNNGridSearchCV(explicit(max_iter=2), {"spectral_radius": [0.9]}, cv=NoSplit(2)).fit(X, None)


def test_divergence_is_reported_and_leaves_finite_weights():
    X, y = visits(40)
    model = explicit(optimizer="sgd", learning_rate=1e6, clip_threshold=None, max_iter=5)
    member = StackedMember(model, *model._prepare(X, y, None, incremental=False))
    with pytest.warns(ConvergenceWarning, match="stacked networks"):
        train_stacked([member])
    assert all(bool(torch.isfinite(p).all()) for p in model.module_.parameters())


def test_a_non_finite_validation_loss_stops_that_network_as_its_own_fit_does():
    # One candidate whose held-out outputs overflowed crashed the whole search with
    # "0 is not in list"; its own fit warns and keeps the initial weights.
    rng = np.random.default_rng(0)
    X = [rng.normal(size=(rng.integers(2, 7), 2)) for _ in range(48)]
    y = np.array([x[:, 0].sum() for x in X]) * 10
    params = dict(hidden_size=6, batch_size=48, random_state=0, device="cpu", max_iter=3,
                  early_stopping=True, validation_fraction=0.25, optimizer="sgd", clip_threshold=None)
    with pytest.warns(ConvergenceWarning, match="validation loss of epoch 1 is inf"):
        alone = RNNRegressor(learning_rate=1e38, **params).fit(X, y)
    with pytest.warns(ConvergenceWarning, match="stacked networks: RNNRegressor: the validation loss of epoch 1 is inf"):
        search = RNNGridSearchCV(RNNRegressor(**params), {"learning_rate": [1e38, 0.01]}, cv=2,
                                 refit=False).fit(X, y)
    assert np.isfinite(search.cv_results_["mean_test_score"]).all()
    assert alone.n_iter_ == 0


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_stacked_on_cuda_matches_fit_on_cuda():
    X, y = visits(60)
    models = [explicit(device="cuda", spectral_radius=radius) for radius in (0.9, 1.2)]
    stacked, alone = stack_and_fit(models, [(X, y)] * 2)
    for a, b in zip(stacked, alone):
        assert next(a.module_.parameters()).is_cuda
        assert largest_difference(a, b) < 1e-5


def test_stacked_networks_with_a_convolutional_stage_match_their_own_fit():
    # The default stage of untimed input (here set explicitly, on timed data with a cell
    # that reads the time as an ordinary input) stacks: torch.func.vmap runs its
    # convolutions over the models.
    X, y = visits(60)
    models = [explicit(cell="gru", time_feature=None, conv_kernels=(3, 5), conv_channels=4,
                       conv_pool=pool, readout="pool", spectral_radius=radius, clip_threshold=tau,
                       random_state=seed)
              for radius, tau, seed, pool in [(0.9, 0.5, 0, 1), (1.3, 2.0, 1, 1), (0.9, 1.0, 2, 2)]]
    stacked, alone = stack_and_fit(models, [(X, y), (X[:50], y[:50]), (X, y)])
    for a, b in zip(stacked, alone):
        assert a.module_.conv.kernel_sizes == (3, 5) and a.n_iter_ == b.n_iter_
        assert a.module_.conv.pool == b.module_.conv.pool
        assert largest_difference(a, b) < 1e-6
        np.testing.assert_allclose(a.predict_proba(X), b.predict_proba(X), atol=1e-5)


# ------------------------------------------------ what GridSearchCV takes, taken the same way
def test_sample_weights_reach_every_network_and_the_refit_as_with_gridsearchcv():
    X, y = visits(60, seed=1)
    weight = np.random.default_rng(0).choice([0.5, 1.0, 3.0], size=len(y))
    pipeline = make_pipeline(SequenceStandardScaler(), explicit(optimizer="adam", learning_rate=0.01, max_iter=10))
    grid = {"rnnclassifier__spectral_radius": [0.9, 1.2]}
    cv = StratifiedKFold(3, shuffle=True, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        loss = dict(cv=cv, scoring="neg_log_loss")
        ours = RNNGridSearchCV(pipeline, grid, **loss).fit(X, y, rnnclassifier__sample_weight=weight)
        theirs = GridSearchCV(pipeline, grid, **loss).fit(X, y, rnnclassifier__sample_weight=weight)
        unweighted = RNNGridSearchCV(pipeline, grid, **loss).fit(X, y)
    np.testing.assert_allclose(ours.cv_results_["mean_test_score"], theirs.cv_results_["mean_test_score"], atol=0.005)
    assert not np.allclose(ours.cv_results_["split0_test_score"], unweighted.cv_results_["split0_test_score"])
    np.testing.assert_array_equal(ours.predict_proba(X), theirs.predict_proba(X))
    with pytest.raises(TypeError, match=r"takes the sample weights \(rnnclassifier__sample_weight=...\).*\['epochs'\]"):
        RNNGridSearchCV(pipeline, grid, cv=cv).fit(X, y, epochs=3)


def test_a_failing_split_scores_error_score_and_is_named():
    # One split without a second class: GridSearchCV scores it NaN with a warning; the
    # whole search stopped here, with no word of the setting or split.
    X, y = visits(24)
    y = np.r_[np.zeros(8, int), (np.arange(16) % 2)]
    splits = [(np.arange(8, 24), np.arange(8)), (np.arange(8), np.arange(8, 24))]  # split 1 trains on class 0 only
    search = RNNGridSearchCV(explicit(), {"spectral_radius": [0.9, 1.2]}, cv=splits, refit=False)
    with pytest.warns(FitFailedWarning, match=r"(?s)2 of the 4 networks failed.*setting \{'spectral_radius': 0.9\} on split 1 \(fit\): ValueError"):
        search.fit(X, y)
    assert np.isnan(search.cv_results_["split1_test_score"]).all()
    assert np.isfinite(search.cv_results_["split0_test_score"]).all()
    with pytest.raises(ValueError, match="at least 2 classes") as raised:
        search.set_params(error_score="raise").fit(X, y)
    assert "split 1" in "".join(raised.value.__notes__)
    search.set_params(error_score=-1.0)
    with pytest.warns(FitFailedWarning):
        search.fit(X, y)
    assert (search.cv_results_["split1_test_score"] == -1.0).all()


def test_a_network_whose_test_and_train_scoring_fail_is_named_with_both():
    # The train scoring's failure replaced the test scoring's in the summary, which then
    # gave the wrong reason for the NaN test score.
    X, y = visits(20)

    def scorer(estimator, X_, y_):
        if estimator.spectral_radius == 0.9:
            raise ValueError(f"cannot score {len(X_)} sequences")
        return 0.5

    search = RNNGridSearchCV(explicit(max_iter=1), {"spectral_radius": [0.9, 1.2]}, cv=2, scoring=scorer,
                             return_train_score=True, refit=False)
    with pytest.warns(FitFailedWarning, match=r"(?s)2 of the 4 networks failed.*"
                                              r"split 0 \(test scoring\).*split 0 \(train scoring\).*"
                                              r"split 1 \(test scoring\).*split 1 \(train scoring\)"):
        search.fit(X, y)
    assert np.isnan(search.cv_results_["split0_test_score"][0])


def test_a_panel_is_searched_by_instance_and_the_names_reach_the_search():
    import pandas as pd

    X, y = visits(30)
    frames = [pd.DataFrame(x, columns=["day", "bili"]) for x in X]
    panel = pd.concat({f"p{i:02d}": frame for i, frame in enumerate(frames)}, names=["patient", "step"])
    grid = {"spectral_radius": [0.9, 1.2]}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        from_panel = RNNGridSearchCV(explicit(time_feature="day"), grid, cv=3).fit(panel, y)
        from_frames = RNNGridSearchCV(explicit(time_feature="day"), grid, cv=3).fit(frames, y)
    np.testing.assert_array_equal(from_panel.cv_results_["mean_test_score"], from_frames.cv_results_["mean_test_score"])
    assert from_panel.feature_names_in_.tolist() == ["day", "bili"]  # as GridSearchCV sets it
    np.testing.assert_array_equal(from_panel.predict_proba(panel), from_frames.predict_proba(frames))


def test_groups_indexed_by_a_panels_instances_in_another_order_are_refused():
    # groups went to the splitter by position: a Series of sites sorted by instance, as
    # groupby gives it, put each site in test and train folds of GroupKFold without a word.
    import pandas as pd
    from sklearn.model_selection import GroupKFold

    X, y = visits(24)
    ids = [f"p{i:02d}" for i in np.random.default_rng(0).permutation(24)]
    panel = pd.concat({i: pd.DataFrame(x, columns=["day", "bili"]) for i, x in zip(ids, X)},
                      names=["patient", "step"])
    site = pd.Series({i: int(i[1:]) // 6 for i in ids})  # in the panel's order
    folds = []

    class Spy(GroupKFold):
        def split(self, X_, y_=None, groups=None):
            for train, test in super().split(X_, y_, groups):
                folds.append((set(site.iloc[train]), set(site.iloc[test])))
                yield train, test

    search = RNNGridSearchCV(explicit(time_feature="day", max_iter=1), {"spectral_radius": [0.9]},
                             cv=Spy(4), refit=False)
    with pytest.raises(ValueError, match=r"groups is indexed by the panel's instances, but in another "
                                         r"order.*other instances' groups.*groups\.loc\[X\.index\.unique\(level=0\)\]"):
        search.fit(panel, y, groups=site.sort_index())
    assert not folds  # refused before any split
    search.fit(panel, y, groups=site)
    assert len(folds) == 4
    for train_sites, test_sites in folds:
        assert len(test_sites) == 1 and not train_sites & test_sites


def test_per_row_targets_or_groups_of_a_panel_are_refused_by_name():
    # A panel is split by instance; a per-row y or groups (a column of the panel) got
    # scikit-learn's bare "inconsistent numbers of samples: [24, 24, 112]".
    import pandas as pd
    from sklearn.model_selection import GroupKFold

    X, y = visits(24)
    panel = pd.concat({f"p{i:02d}": pd.DataFrame(x, columns=["day", "bili"]) for i, x in enumerate(X)},
                      names=["patient", "step"])
    rows = len(panel)
    site = pd.Series([int(i[1:]) // 6 for i in panel.index.get_level_values(0)], index=panel.index)
    search = RNNGridSearchCV(explicit(time_feature="day", max_iter=1), {"spectral_radius": [0.9]},
                             cv=GroupKFold(4), refit=False)
    with pytest.raises(ValueError, match=rf"groups has {rows} entries, but the panel X has 24 instances.*one entry "
                                         r"per instance.*groups\.groupby\(level=0, sort=False\)\.first\(\)"):
        search.fit(panel, y, groups=site)
    with pytest.raises(ValueError, match=rf"y has {rows} entries, but the panel X has 24 instances"):
        search.fit(panel, panel["bili"].gt(0).astype(int))
    search.fit(panel, y, groups=site.groupby(level=0, sort=False).first())  # the advice given
    # A per-row array has no groupby: the advice wraps it. A column's name was counted by
    # its letters ("y has 5 entries"), with advice that fails on a str.
    per_row = panel["bili"].gt(0).astype(int).to_numpy()
    with pytest.raises(ValueError, match=r"take each instance's first: pandas\.Series\(y, index=X\.index\)"):
        search.fit(panel, per_row)
    labelled = panel.assign(label=per_row, site=site)
    for kwargs, name in (({"y": "label"}, "y"), ({"y": y, "groups": "site"}, "groups")):
        with pytest.raises(ValueError, match=rf"^{name} is a str: expected one entry per instance of the panel "
                           rf"X \(24\).*not a column's name: e\.g\. X\['{kwargs[name]}'\]\.groupby"):
            search.fit(labelled, **kwargs)


def test_splits_that_index_a_panel_s_rows_are_refused_by_name():
    # cv built on a panel's rows (GroupKFold over its rows) gave a bare IndexError.
    import pandas as pd
    from sklearn.model_selection import GroupKFold

    X, y = visits(24)
    panel = pd.concat({f"p{i:02d}": pd.DataFrame(x, columns=["day", "bili"]) for i, x in enumerate(X)},
                      names=["patient", "step"])
    by_rows = list(GroupKFold(3).split(panel, groups=panel.index.get_level_values(0)))
    search = RNNGridSearchCV(explicit(time_feature="day", max_iter=1), {"spectral_radius": [0.9]}, cv=by_rows)
    with pytest.raises(ValueError, match=r"^cv gave index \d+ in the (train|test) part of split 0, but the "
                       r"panel X has 24 instances: a panel is split by instance"):
        search.fit(panel, y)
    with pytest.raises(ValueError, match=r"^cv gave index 24 in the test part of split 0, but X has 24 sequences\.$"):
        RNNGridSearchCV(explicit(max_iter=1), {"spectral_radius": [0.9]},
                        cv=[(np.arange(12), np.arange(12, 25))]).fit(X, y)


@pytest.mark.parametrize("given", ["class", "pipeline of a class", "nested pipeline"])
def test_an_estimator_class_or_a_nested_pipeline_is_refused_for_what_it_is(given):
    # The class was reported as "got ABCMeta ... use GridSearchCV" (which refuses it too);
    # a pipeline ending in a pipeline ending in an RNN as "got Pipeline".
    from sklearn.pipeline import Pipeline

    X, y = visits(12)
    estimator = {"class": RNNClassifier,
                 "pipeline of a class": make_pipeline(SequenceStandardScaler(), RNNClassifier),
                 "nested pipeline": Pipeline([("pre", SequenceStandardScaler()),
                                              ("model", make_pipeline(SequenceStandardScaler(), explicit()))])}[given]
    match = (r"takes a pipeline whose last step is the RNN estimator itself; got a pipeline ending in "
             r"another pipeline\. Join them into one" if given == "nested pipeline" else
             r"^RNNGridSearchCV expected an estimator instance, e\.g\. RNNClassifier\(\); got the class "
             r"RNNClassifier itself")
    with pytest.raises(TypeError, match=match):
        RNNGridSearchCV(estimator, {"spectral_radius": [0.9]}, cv=2).fit(X, y)


@pytest.mark.parametrize("options", [
    {"scoring": ["accuracy", "roc_auc"]}, {"scoring": {"acc": "accuracy"}, "refit": "acc"},
    {"refit": lambda results: 0},
])
def test_several_metrics_are_refused_in_a_line_that_names_gridsearchcv(options):
    # A list of scorers drew a 1300-character list of every scorer's name.
    X, y = visits(20)
    with pytest.raises(ValueError, match=r"scores one metric.*sklearn.model_selection.GridSearchCV") as raised:
        RNNGridSearchCV(explicit(), {"spectral_radius": [0.9]}, cv=2, **options).fit(X, y)
    assert len(str(raised.value)) < 400


@pytest.mark.parametrize("refit", [np.True_, np.False_])
def test_a_numpy_boolean_refit_is_read_as_a_boolean_as_in_grid_search_cv(refit):
    # Its parameter check took np.True_ and np.False_, and fit refused them as a refit by
    # name, asking for "True or False".
    X, y = visits(20)
    search = RNNGridSearchCV(explicit(max_iter=2), {"spectral_radius": [0.9, 1.2]}, cv=2, refit=refit).fit(X, y)
    assert hasattr(search, "best_estimator_") == bool(refit)


def test_a_search_where_every_network_fails_is_an_error_and_train_scores_fail_alone():
    X, y = visits(24)
    one_class = np.zeros(24, int)
    search = RNNGridSearchCV(explicit(), {"spectral_radius": [0.9, 1.2]}, cv=[(np.arange(12), np.arange(12, 24))],
                             refit=False)
    with pytest.raises(ValueError, match=r"(?s)All the 2 networks failed.*at least 2 classes"):
        search.fit(X, one_class)  # GridSearchCV raises too; this returned NaN scores
    calls = {"n": 0}

    def train_fails(estimator, X_, y_):  # every second call: the train split's
        calls["n"] += 1
        if calls["n"] % 2 == 0:
            raise RuntimeError("no train score")
        return 0.5

    search = RNNGridSearchCV(explicit(), {"spectral_radius": [0.9]}, scoring=train_fails, cv=2,
                             return_train_score=True, refit=False)
    with pytest.warns(FitFailedWarning, match="train scoring"):
        search.fit(X, np.arange(24) % 2)
    assert (search.cv_results_["mean_test_score"] == 0.5).all()  # NaN before
    assert np.isnan(search.cv_results_["mean_train_score"]).all()


@pytest.mark.parametrize("cv", ["empty list", "predefined split without a test fold"])
def test_a_cv_without_splits_is_refused_as_such(cv):
    # It was reported as "All the 0 networks failed ... the model is likely misconfigured".
    from sklearn.model_selection import PredefinedSplit

    X, y = visits(20)
    cv = [] if cv == "empty list" else PredefinedSplit([-1] * 20)
    with pytest.raises(ValueError, match=r"(?s)cv=.* gave no \(train, test\) split") as raised:
        RNNGridSearchCV(explicit(max_iter=2), {"spectral_radius": [0.9, 1.2]}, cv=cv).fit(X, y)
    assert "failed" not in str(raised.value)


def test_a_scalar_sample_weight_and_the_warnings_point_at_the_callers_line():
    # A scalar weight failed every network ("'float' object is not subscriptable"), and
    # the warnings named scikit-learn's wrapper as their place.
    X, y = visits(24)
    y = np.r_[np.zeros(8, int), (np.arange(16) % 2)]
    grid = {"spectral_radius": [0.9]}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        weighted = RNNGridSearchCV(explicit(), grid, cv=2, refit=False).fit(X, y, sample_weight=2.0)
        plain = RNNGridSearchCV(explicit(), grid, cv=2, refit=False).fit(X, y)
    np.testing.assert_array_equal(weighted.cv_results_["mean_test_score"], plain.cv_results_["mean_test_score"])
    # In the search's words (the estimator's check told of a sampler, which had not run).
    with pytest.raises(ValueError, match=r"sample_weight has 3 entries, but X has 24 sequences: pass one weight "
                                         r"per sequence, in the order of X\.$"):
        RNNGridSearchCV(explicit(), grid, cv=2).fit(X, y, sample_weight=[1.0, 2.0, 3.0])
    splits = [(np.arange(8, 24), np.arange(8)), (np.arange(8), np.arange(8, 24))]
    with pytest.warns(FitFailedWarning) as caught:
        RNNGridSearchCV(explicit(), grid, cv=splits, refit=False).fit(X, y)
    failed = [w for w in caught if w.category is FitFailedWarning]
    assert failed and all(w.filename == __file__ for w in failed)


def test_pipelines_with_a_sampler_or_of_one_step_search_as_in_grid_search_cv():
    # The steps before the network ran as one fit_transform: a sampler resampled X but
    # not y (every network failed, "y has 15 entries, but X has 10 sequences"), and a
    # pipeline of the network alone had no steps to fit_transform (AttributeError).
    from imblearn.pipeline import make_pipeline as make_imblearn_pipeline
    from imblearn.under_sampling import RandomUnderSampler

    from sklearn_rnn.sequences import sequence_column

    rng = np.random.default_rng(0)
    X = sequence_column([rng.normal(size=(int(n), 2)) for n in rng.integers(3, 7, 30)])
    y = np.array([0] * 20 + [1] * 10)
    grid = {"rnnclassifier__hidden_size": [2, 3]}
    for pipeline in (make_imblearn_pipeline(RandomUnderSampler(random_state=0), SequenceStandardScaler(),
                                            explicit(cell="gru", time_feature=None)),
                     make_pipeline(explicit(cell="gru", time_feature=None))):
        ours = RNNGridSearchCV(pipeline, grid, cv=2).fit(X, y)
        theirs = GridSearchCV(pipeline, grid, cv=2).fit(X, y)
        np.testing.assert_allclose(ours.cv_results_["mean_test_score"],
                                   theirs.cv_results_["mean_test_score"], atol=1e-6)
    weighted = RNNGridSearchCV(make_imblearn_pipeline(RandomUnderSampler(random_state=0),
                                                      explicit(cell="gru", time_feature=None)), grid, cv=2)
    with pytest.raises(ValueError, match=r"(?s)All the 4 networks failed.*resamples the training sequences"):
        weighted.fit(X, y, rnnclassifier__sample_weight=np.ones(30))


def test_a_sampler_that_keeps_every_sequence_takes_sample_weights_as_in_grid_search_cv():
    # Any sampler with sample weights failed every network, even one that keeps every
    # sequence in its place; imbalanced-learn's pipeline under GridSearchCV fits it.
    from imblearn import FunctionSampler
    from imblearn.pipeline import make_pipeline as make_imblearn_pipeline

    from sklearn_rnn.sequences import sequence_column

    X, y = visits(30)
    weight = np.random.default_rng(0).uniform(0.5, 2.0, len(y))

    def clip(X_, y_):  # cleans the values, keeps the sequences
        clipped = np.empty_like(X_)
        for i, x in enumerate(X_[:, 0]):
            clipped[i, 0] = np.clip(x, -2.0, None)
        return clipped, y_

    pipeline = make_imblearn_pipeline(FunctionSampler(func=clip, validate=False), explicit(max_iter=2))
    grid = {"rnnclassifier__spectral_radius": [0.9, 1.2]}
    fit_params = {"rnnclassifier__sample_weight": weight}
    ours = RNNGridSearchCV(pipeline, grid, cv=3).fit(sequence_column(X), y, **fit_params)
    theirs = GridSearchCV(pipeline, grid, cv=3).fit(sequence_column(X), y, **fit_params)
    np.testing.assert_allclose(ours.cv_results_["mean_test_score"], theirs.cv_results_["mean_test_score"], atol=1e-6)


class _Shifted(BaseEstimator):
    """A transformer with fit and transform but no fit_transform, which Pipeline takes."""

    def fit(self, X, y=None):
        self.shift_ = 1.0
        return self

    def transform(self, X):
        return [np.asarray(x, dtype=float) + [0.0, self.shift_] for x in X]


def test_a_pipeline_step_without_fit_transform_is_fitted_then_transforms_as_in_grid_search_cv():
    # Every network failed in preparation ("'_Shifted' object has no attribute
    # 'fit_transform'"), so the search raised where GridSearchCV searches.
    X, y = visits(40)
    pipeline = make_pipeline(_Shifted(), explicit(max_iter=2))
    grid = {"rnnclassifier__spectral_radius": [0.9, 1.2]}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        ours = RNNGridSearchCV(pipeline, grid, cv=2).fit(X, y)
        theirs = GridSearchCV(pipeline, grid, cv=2).fit(X, y)
    np.testing.assert_allclose(ours.cv_results_["mean_test_score"], theirs.cv_results_["mean_test_score"], atol=1e-6)


def test_weighted_scores_follow_the_installed_grid_search_cv():
    # scikit-learn 1.7 and later give a bare estimator's sample_weight to the scorer;
    # the stacked search scored unweighted, and the best setting could differ.
    X, y = visits(40)
    weight = np.random.default_rng(1).uniform(0.2, 3.0, len(y))
    grid = {"spectral_radius": [0.9, 1.5]}
    ours = RNNGridSearchCV(explicit(), grid, cv=2).fit(X, y, sample_weight=weight)
    theirs = GridSearchCV(explicit(), grid, cv=2).fit(X, y, sample_weight=weight)
    np.testing.assert_allclose(ours.cv_results_["mean_test_score"], theirs.cv_results_["mean_test_score"], atol=1e-6)


def test_fit_parameters_under_metadata_routing_are_refused_with_the_way_out():
    # Under routing the weights of a pipeline were refused after the whole search, at the
    # refit, and a bare estimator's were used even where it had not requested them.
    import sklearn

    X, y = visits(20)
    search = RNNGridSearchCV(explicit(), {"spectral_radius": [0.9]}, cv=2)
    with sklearn.config_context(enable_metadata_routing=True):
        with pytest.raises(ValueError, match=r"does not route metadata.*GridSearchCV, which routes it"):
            search.fit(X, y, sample_weight=np.ones(20))
        assert search.fit(X, y).best_params_ == {"spectral_radius": 0.9}  # without parameters it searches
        # sample_weight=None is no parameter, as for GridSearchCV (wrappers forward it)
        assert search.fit(X, y, sample_weight=None).best_params_ == {"spectral_radius": 0.9}


def test_a_scikit_learn_pipeline_holding_a_sampler_is_refused_before_any_training(monkeypatch):
    # scikit-learn's Pipeline takes no sampler before its last step (imbalanced-learn's
    # does): GridSearchCV refuses it in every fit; the stacked search trained every
    # network, then every score failed, and with refit=False it returned NaN scores.
    from imblearn.under_sampling import RandomUnderSampler
    from sklearn.pipeline import Pipeline

    from sklearn_rnn import _stacked

    X, y = visits(30)
    trained = []
    monkeypatch.setattr(_stacked, "_train_chunk", lambda *a, **k: trained.append(1))
    pipeline = Pipeline([("sampler", RandomUnderSampler(random_state=0)), ("rnn", explicit())])
    for refit in (True, False):
        with pytest.raises(TypeError, match=r"intermediate steps should be transformers.*\['sampler'\] resample.*"
                                            r"imblearn.pipeline.Pipeline"):
            RNNGridSearchCV(pipeline, {"rnn__spectral_radius": [0.9, 1.5]}, cv=2, refit=refit).fit(X, y)
    grid = {"sampler": [RandomUnderSampler(random_state=0)]}  # a sampler put in by the grid: that setting fails
    with pytest.raises(TypeError, match="imblearn.pipeline.Pipeline"):
        RNNGridSearchCV(Pipeline([("sampler", "passthrough"), ("rnn", explicit())]), grid, cv=2,
                        error_score="raise").fit(X, y)
    with pytest.raises(ValueError, match=r"(?s)All the 2 networks failed.*imblearn.pipeline.Pipeline"):
        RNNGridSearchCV(Pipeline([("sampler", "passthrough"), ("rnn", explicit())]), grid, cv=2).fit(X, y)
    assert not trained


def test_an_empty_callbacks_list_is_stacked_like_none():
    # callbacks=[] runs no callback of the user's, but was refused as if it held some.
    X, y = visits(30)
    grid = {"spectral_radius": [0.9, 1.5]}
    ours = RNNGridSearchCV(explicit(callbacks=[]), grid, cv=2).fit(X, y)
    theirs = GridSearchCV(explicit(callbacks=[]), grid, cv=2).fit(X, y)
    np.testing.assert_allclose(ours.cv_results_["mean_test_score"], theirs.cv_results_["mean_test_score"], atol=1e-6)


def test_non_finite_mean_train_scores_are_warned_of_as_test_scores_are():
    X, y = visits(30)

    def test_only(estimator, X_, y_):  # NaN on the training parts (20 sequences), 0.5 on the tests
        return float("nan") if len(y_) > 15 else 0.5

    search = RNNGridSearchCV(explicit(), {"spectral_radius": [0.9]}, cv=3, scoring=test_only,
                             return_train_score=True)
    with pytest.warns(UserWarning, match=r"mean train scores are non-finite: \[nan\]"):
        search.fit(X, y)
    assert search.cv_results_["mean_test_score"].tolist() == [0.5]


def test_the_score_time_is_the_test_scoring_s_as_in_grid_search_cv():
    # With return_train_score, the train scoring was timed into score_time too;
    # GridSearchCV's score_time is the test scoring's.
    import time

    X, y = visits(20)

    def slow_on_train(estimator, X_, y_):  # the 15-sequence training parts are slow, the tests not
        if len(y_) > 10:
            time.sleep(0.3)
        return 0.5

    search = RNNGridSearchCV(explicit(max_iter=1), {"spectral_radius": [0.9]}, cv=4, scoring=slow_on_train,
                             return_train_score=True, refit=False).fit(X, y)
    assert search.cv_results_["mean_score_time"][0] < 0.15


# ------------------------------------------------ an outside review of the stack (session 31)
def test_a_grid_setting_that_its_fit_refuses_scores_error_score_as_in_grid_search_cv():
    # optimizer='simplex' with the 'decay' cell refused the whole search (naming
    # GridSearchCV, which scores that setting NaN), though other invalid values score
    # error_score.
    X, y = visits(30)
    with pytest.raises(ValueError, match="optimizer='simplex' combines temporal gradients.*cell='decay'"):
        check_stackable(explicit(optimizer="simplex"))
    grid = {"optimizer": ["sgd", "simplex"]}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ours = RNNGridSearchCV(explicit(), grid, cv=2).fit(X, y)
        theirs = GridSearchCV(explicit(), grid, cv=2).fit(X, y)
    np.testing.assert_allclose(ours.cv_results_["mean_test_score"], theirs.cv_results_["mean_test_score"], atol=1e-3)
    assert np.isnan(ours.cv_results_["mean_test_score"][1]) and ours.best_params_ == {"optimizer": "sgd"}
    assert any(w.category is FitFailedWarning and "combines temporal gradients" in str(w.message) for w in caught)
    with pytest.raises(ValueError, match="combines temporal gradients"):
        RNNGridSearchCV(explicit(), grid, cv=2, error_score="raise").fit(X, y)


def test_a_scorer_returning_several_metrics_or_no_number_is_refused():
    # A callable returning a dict scored every network NaN (a FitFailedWarning each) and
    # refitted the first setting as the best.
    from sklearn.metrics import accuracy_score

    X, y = visits(30)

    def two_metrics(model, X, y):
        return {"acc": accuracy_score(y, model.predict(X)), "n": len(y)}

    search = RNNGridSearchCV(explicit(max_iter=2), {"learning_rate": [0.01, 0.5]}, cv=2, scoring=two_metrics)
    with pytest.raises(ValueError, match=r"returned several metrics \(\['acc', 'n'\]\).*one metric.*GridSearchCV"):
        search.fit(X, y)
    assert not hasattr(search, "best_estimator_")
    with pytest.raises(ValueError, match="returned 'good' \\(str\\); expected a number"):
        search.set_params(scoring=lambda model, X, y: "good").fit(X, y)
    search.set_params(scoring=lambda model, X, y: np.float32(0.5)).fit(X, y)  # a number of any type
    assert search.cv_results_["mean_test_score"].tolist() == [0.5, 0.5]


def test_threads_get_one_summary_and_leave_the_callers_warning_filters_as_they_were():
    # Under joblib's threading backend every chunk entered catch_warnings in its own
    # thread: about one run in two lost the summary (each network's warning escaped) and
    # left the filters starting with 'always', so later warnings were swallowed.
    from joblib import parallel_backend

    X, y = visits(30)
    grid = {"learning_rate": [0.05, 0.5], "random_state": [0, 1]}
    for _ in range(4):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            warnings.filterwarnings("ignore", category=DeprecationWarning)
            filters = list(warnings.filters)
            with parallel_backend("threading", n_jobs=2):
                RNNGridSearchCV(explicit(max_iter=2, tol=0.0), grid, cv=2, refit=False).fit(X, y)
            assert warnings.filters == filters
            summaries = [w for w in caught if w.category is ConvergenceWarning]
            assert len(summaries) == 1 and str(summaries[0].message).startswith("8 of 8 stacked networks")
            assert summaries[0].filename == __file__  # the line that calls fit
            warnings.warn("a later warning")
            assert str(caught[-1].message) == "a later warning"


def test_stacked_validation_scores_are_weighted_as_a_fit_s():
    # A fit's validation scores read the held-out sequences' weights (as its validation
    # loss does); the stack's read the same weights.
    X, y = visits(60, seed=2)
    weight = np.random.default_rng(0).choice([0.0, 1.0, 3.0], size=len(y))
    models = [explicit(optimizer="sgd", random_state=seed, max_iter=4, early_stopping=True,
                       validation_fraction=0.5, n_iter_no_change=100) for seed in (0, 1)]
    stacked, alone = stack_and_fit(models, [(X, y)] * len(models), sample_weight=weight)
    for a, b in zip(stacked, alone):
        np.testing.assert_allclose(a.validation_scores_, b.validation_scores_, atol=1e-9)
        unweighted = clone(b).fit(X, y).validation_scores_
        assert not np.allclose(b.validation_scores_, unweighted)


# ------------------------------------------------ an outside review of the stack (session 34)
def test_an_exploding_gradient_takes_the_clipped_step_as_its_own_fit_does():
    # The stack took the norm of eq. 3.6 as a float32 sum of squares, infinite past about
    # 1.8e19 though every entry was finite, and skipped the step: the network stayed at
    # its initial weights, where its ClippedSGD (whose norm does not overflow) takes the
    # clipped step.
    X, y = visits(12)
    X = [x * 1e20 for x in X]
    model = RNNClassifier(cell="relu", hidden_size=4, optimizer="sgd", learning_rate=0.1, clip_threshold=1.0,
                          instance_norm=False, max_iter=3, tol=0, n_iter_no_change=100, random_state=0,
                          device="cpu")
    (stacked,), (alone,) = stack_and_fit([model], [(X, y)])
    assert alone.net_.optimizer_.skipped_steps == 0 and alone.loss_curve_[-1] < 0.5 * alone.loss_curve_[0]
    np.testing.assert_allclose(stacked.loss_curve_, alone.loss_curve_, rtol=1e-4)
    assert largest_difference(stacked, alone) < 1e-6


def test_divergence_is_judged_on_the_data_loss_as_a_fit_judges_it():
    # The stack stopped a network when its loss plus L2 penalty left the float32 range
    # (weights above about 1e19), as "the training loss became inf", though the data loss
    # was finite and its own fit goes on; and it skipped that step. A lost training loss
    # was worded without the batch ("in epoch 3, so training stopped"), which a fit names.
    X, y = visits(20)
    for learning_rate, diverged, epochs in [
        (1e4, None, 6), (1e12, "the weights became non-finite in epoch 2", 1),
        (1e10, "the training loss became nan in epoch 3, batch 2, so training stopped", 2),
    ]:
        model = explicit(learning_rate=learning_rate, clip_threshold=None, max_iter=6, tol=0, n_iter_no_change=100)
        stacked, alone = clone(model), clone(model)
        member = StackedMember(stacked, *stacked._prepare(X, y, None, incremental=False))
        with warnings.catch_warnings(record=True) as ours:
            warnings.simplefilter("always")
            train_stacked([member])
        with warnings.catch_warnings(record=True) as theirs:
            warnings.simplefilter("always")
            alone.fit(X, y)
        ours, theirs = [str(w.message) for w in ours], [str(w.message) for w in theirs]
        assert stacked.n_iter_ == alone.n_iter_ == epochs
        np.testing.assert_allclose(stacked.loss_curve_, alone.loss_curve_, rtol=1e-5)
        if diverged is None:  # the penalized objective overflowed, the data loss did not
            assert np.isinf(alone.net_.history[-1, "train_objective"]) and np.isfinite(alone.loss_curve_).all()
            # No divergence; both keep the initial weights, whose objective no epoch lowered.
            assert len(ours) == len(theirs) == 1 and ours[0] == f"1 of 1 stacked networks: {theirs[0]}"
            assert "none of the 6 epochs lowered the training objective" in theirs[0]
        else:  # the same words as the fit's (the stack said "the weights of epoch 1 are kept", which
            # its stopping rule then replaced with the initial weights, as the second warning says)
            assert len(ours) == len(theirs) == 2 and diverged in theirs[0]
            assert ours == [f"1 of 1 stacked networks: {message}" for message in theirs]


def test_the_divergence_summary_counts_each_cause_and_names_every_epoch():
    # Every divergence was counted under the first network's text (the key was the
    # class name): networks whose weights overflowed in epochs 2 and 3 and whose loss was
    # lost in epochs 3 and 4 were summarized as "4 of 5 ... the weights became non-finite
    # in epoch 2".
    X, y = visits(20)
    members = []
    for learning_rate in (1e12, 1e10, 1e8, 1e7, 0.05):
        model = explicit(learning_rate=learning_rate, clip_threshold=None, max_iter=6, tol=0, n_iter_no_change=100)
        members.append(StackedMember(model, *model._prepare(X, y, None, incremental=False)))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        train_stacked(members)
    assert [member.estimator.n_iter_ for member in members] == [1, 2, 2, 3, 6]
    summaries = sorted(str(w.message) for w in caught if w.category is ConvergenceWarning)
    assert len(summaries) == 4
    assert summaries[0].startswith("1 of 5 stacked networks: RNNClassifier reached max_iter=6")
    assert summaries[1].startswith(
        "2 of 5 stacked networks, in epochs 2, 3; the first: RNNClassifier: the weights became non-finite in "
        "epoch 2, so training stopped and training ends as after epoch 1, with the weights of the best epoch so far")
    assert summaries[2].startswith(
        "2 of 5 stacked networks, in epochs 3, 4; the first: RNNClassifier: the training loss became nan in "
        "epoch 3, batch 2, so training stopped and training ends as after epoch 2, with the weights of the best epoch so far")
    # The diverged networks' stopping rules keep their initial weights, each after its own epochs.
    assert summaries[3].startswith(
        "4 of 5 stacked networks, after 1, 2, 3 epochs; the first: RNNClassifier: none of the 1 epochs lowered")


def test_the_summary_groups_the_networks_on_their_facts_not_on_their_messages():
    # The summary parsed the networks' warnings with regular expressions: a reworded
    # message changed its counts, and networks that reached max_iter with different
    # monitored losses were counted under the first one's text ("2 of 5 ... the training
    # objective was still improving" for a network without L2 penalty, whose training
    # loss was). The outcomes now come as facts from where they are found, and the
    # summary's counts are the members' counts of each kind.
    X, y = visits(20)
    members = []
    for learning_rate, alpha in [(1e12, 1.0), (1e8, 1.0), (1e10, 1.0), (0.05, 1.0), (0.05, 0.0)]:
        model = explicit(learning_rate=learning_rate, alpha=alpha, clip_threshold=None, max_iter=6, tol=0,
                         n_iter_no_change=100)
        members.append(StackedMember(model, *model._prepare(X, y, None, incremental=False)))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        train_stacked(members)
    assert [[(outcome.cause, outcome.epoch) for outcome in member.outcomes] for member in members] == [
        [("diverged", 2), ("kept_start", 1)], [("diverged", 3), ("kept_start", 2)],
        [("diverged", 3), ("kept_start", 2)], [("max_iter", 6)], [("max_iter", 6)],
    ]
    summaries = sorted(str(w.message) for w in caught if w.category is ConvergenceWarning)
    counted = [int(summary.split(" of 5 stacked networks")[0]) for summary in summaries]
    kinds = Counter(outcome.kind for member in members for outcome in member.outcomes)
    assert sorted(counted) == sorted(kinds.values()) == [1, 1, 1, 2, 3]
    assert summaries[0].startswith("1 of 5 stacked networks: RNNClassifier reached max_iter=6 epochs without "
                                   "converging: the training loss was still improving")
    assert summaries[1].startswith("1 of 5 stacked networks: RNNClassifier reached max_iter=6 epochs without "
                                   "converging: the training objective")
    assert summaries[2].startswith("1 of 5 stacked networks: RNNClassifier: the training loss became nan in epoch 3")
    assert summaries[3].startswith(
        "2 of 5 stacked networks, in epochs 2, 3; the first: RNNClassifier: the weights became non-finite in epoch 2")
    assert summaries[4].startswith("3 of 5 stacked networks, after 1, 2 epochs; the first: RNNClassifier: none of")


def test_a_sampler_put_in_a_scikit_learn_pipeline_by_the_grid_scores_error_score_as_in_grid_search_cv():
    # A grid value that the pipeline's own fit refuses (a sampler as a step of
    # scikit-learn's Pipeline) refused the whole search; GridSearchCV scores that
    # setting error_score and searches the others, as the stack does for other invalid values.
    from imblearn.under_sampling import RandomUnderSampler
    from sklearn.pipeline import Pipeline

    X, y = visits(30)
    pipeline = Pipeline([("scale", SequenceStandardScaler()), ("rnn", explicit(max_iter=2))])
    grid = {"scale": [SequenceStandardScaler(), RandomUnderSampler(random_state=0)]}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ours = RNNGridSearchCV(pipeline, grid, cv=2, refit=False).fit(X, y)
        theirs = GridSearchCV(pipeline, grid, cv=2, refit=False).fit(X, y)
    np.testing.assert_allclose(ours.cv_results_["mean_test_score"], theirs.cv_results_["mean_test_score"], atol=1e-6)
    assert np.isnan(ours.cv_results_["mean_test_score"][1]) and np.isfinite(ours.cv_results_["mean_test_score"][0])
    assert any(w.category is FitFailedWarning and "imblearn.pipeline.Pipeline" in str(w.message) for w in caught)


def test_a_scorer_returning_a_one_element_array_is_read_as_grid_search_cv_reads_it():
    # GridSearchCV unwraps a scorer's value with .item(); the stacked search refused a
    # one-element array as "no number".
    from sklearn.metrics import accuracy_score

    X, y = visits(30)

    def one_element(model, X, y):
        return np.array([accuracy_score(y, model.predict(X))])

    grid = {"learning_rate": [0.01, 0.5]}
    ours = RNNGridSearchCV(explicit(max_iter=2), grid, cv=2, scoring=one_element).fit(X, y)
    theirs = GridSearchCV(explicit(max_iter=2), grid, cv=2, scoring=one_element).fit(X, y)
    np.testing.assert_allclose(ours.cv_results_["mean_test_score"], theirs.cv_results_["mean_test_score"], atol=1e-6)
    assert ours.best_params_ == theirs.best_params_ and isinstance(ours.best_score_, float)
    with pytest.raises(ValueError, match=r"returned array\(\[0.5, 0.5\]\) \(ndarray\); expected a number"):
        ours.set_params(scoring=lambda model, X, y: np.array([0.5, 0.5])).fit(X, y)


def test_the_verbose_log_gives_the_jobs_that_train(caplog):
    # The log gave n_jobs as set: "-1 job(s)", and "1 job(s)" under a joblib backend of 2
    # jobs, which trains in 2; train_stacked counts them with joblib.effective_n_jobs.
    from joblib import effective_n_jobs, parallel_backend

    X, y = visits(20)
    search = RNNGridSearchCV(explicit(max_iter=1), {"learning_rate": [0.01, 0.1]}, cv=2, refit=False, verbose=1)
    expected = []
    with caplog.at_level("INFO", logger="sklearn_rnn.model_selection"), warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        for n_jobs, backend in [(None, {"n_jobs": 2}), (-1, {})]:
            with parallel_backend("threading", **backend):
                search.set_params(n_jobs=n_jobs).fit(X, y)
                expected.append(f"4 networks, stacks of at most 64, {effective_n_jobs(n_jobs)} job(s)")
    assert expected[0].endswith(" 2 job(s)") and not expected[1].endswith(" -1 job(s)")
    logged = [record.getMessage() for record in caplog.records if record.name == "sklearn_rnn.model_selection"]
    assert [message[-len(text):] for message, text in zip(logged, expected)] == expected and len(logged) == 2


@pytest.mark.parametrize("cell", ["tanh", "lstm"])
def test_alpha_leaves_the_learned_initial_states_out_in_fit_and_in_the_stack(cell):
    # alpha penalizes the weight matrices only: a learned initial state is a vector per
    # layer (stored as rows, like a matrix), and the fit and the stack both leave it out.
    from sklearn_rnn._stacked import _Stack

    X, y = visits(30)
    model = explicit(cell=cell, num_layers=2, hidden_init="learned", alpha=10.0)
    member = StackedMember(model, *model._prepare(X, y, None, incremental=False))
    net = model.net_
    module = net.module_
    names = ["initial_hidden", "initial_cell"] if cell == "lstm" else ["initial_hidden"]
    with torch.no_grad():
        for name in names:
            getattr(module, name).fill_(3.0)  # far from the zeros they start at
    weights = [p for name, p in module.named_parameters() if p.requires_grad and p.ndim >= 2 and name not in names]
    expected = 0.5 * net.l2_penalty * float(sum(p.detach().double().square().sum() for p in weights))
    y_pred, y_true = torch.zeros(4, 2), torch.tensor([0, 1, 1, 0])
    penalty = net.get_loss(y_pred, y_true, training=True).detach() - net.data_loss_
    assert float(penalty) == pytest.approx(expected, rel=1e-5)
    stack = _Stack([member])  # a copy of the module's values, initial states included
    assert float(stack._penalty(stack.params)[0]) == pytest.approx(expected, rel=1e-5)


def test_a_search_takes_a_nested_tensor_as_the_estimator_does():
    # The estimator reads a torch nested tensor as the list of its tensors; the search
    # called len() on it: PyTorch's "Internal error: NestedTensorImpl doesn't support sizes".
    X, y = visits(40)
    nested = torch.nested.nested_tensor([torch.tensor(x) for x in X])
    grid = {"hidden_size": [3, 4]}
    model = explicit(max_iter=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        from_nested = RNNGridSearchCV(model, grid, cv=2).fit(nested, y)
        from_list = RNNGridSearchCV(model, grid, cv=2).fit([torch.tensor(x) for x in X], y)
    np.testing.assert_allclose(from_nested.cv_results_["mean_test_score"], from_list.cv_results_["mean_test_score"])
    assert from_nested.best_params_ == from_list.best_params_


def test_a_diverged_simplex_network_keeps_the_optimizer_state_of_its_last_finished_epoch():
    # The stack undid a diverged network's weights but not its optimizer's state: the
    # simplex random stream and branch counts of the diverging epoch stayed, and a later
    # partial_fit took another path than after its own fit.
    X, y = visits(40)
    diverging = explicit(RNNRegressor, cell="tanh", time_feature=None, optimizer="simplex", batch_size=8,
                         max_iter=4, learning_rate=1e15, clip_threshold=1e15)
    y = np.array([x[:, 1].sum() for x in X])
    (stacked, _), (alone, _) = stack_and_fit([diverging, clone(diverging).set_params(learning_rate=0.01)],
                                             [(X, y)] * 2)
    assert alone.n_iter_ == stacked.n_iter_ == 0
    assert stacked.branch_counts_ == alone.branch_counts_
    assert torch.equal(stacked.net_.optimizer_.generator.get_state(), alone.net_.optimizer_.generator.get_state())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        for model in (stacked, alone):
            model.set_params(learning_rate=0.01, clip_threshold=1.0).partial_fit(X, y)
    assert largest_difference(stacked.net_, alone.net_) < 1e-6


def test_adam_keeps_the_state_of_a_parameter_the_data_do_not_reach_as_its_own_fit_does():
    # The decay of missing inputs whose missing values are all in sequences of weight 0
    # (or in the early-stopping hold-out) gets zero gradients: the stack gave it no Adam
    # state where fit counts its steps, so the next partial_fit moved it differently and
    # a StackedStream refused the estimator.
    from sklearn_rnn._stacked import StackedStream

    X, y = visits(40)
    X[0] = X[0].copy()
    X[0][-1, 1] = np.nan
    weight = np.ones(len(X))
    weight[0] = 0.0
    model = explicit(optimizer="adam", max_iter=3, batch_size=8)
    (stacked,), (alone,) = stack_and_fit([model], [(X, y)], sample_weight=weight)
    for name in ("recurrence.input_decay", "recurrence.input_baseline"):
        p_alone = dict(alone.module_.named_parameters())[name]
        p_stacked = dict(stacked.module_.named_parameters())[name]
        assert p_alone.numel() and p_alone in alone.net_.optimizer_.state
        assert float(stacked.net_.optimizer_.state[p_stacked]["step"]) == float(
            alone.net_.optimizer_.state[p_alone]["step"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        for fitted in (stacked, alone):
            fitted.partial_fit(X, y, sample_weight=weight)
    assert largest_difference(stacked.net_, alone.net_) < 1e-5
    StackedStream([stacked])  # one step count for every parameter


def test_the_same_estimator_in_two_members_is_refused_by_name():
    # It was trained twice per epoch: n_iter_ 6 of max_iter=3, and wrong weights.
    X, y = visits(20)
    model = explicit(max_iter=3)
    member = StackedMember(model, *model._prepare(X, y, None, incremental=False))
    with pytest.raises(ValueError, match=r"^member 1's estimator is the same object as an earlier member's"):
        train_stacked([member, StackedMember(model, member.train, member.valid)])
    assert not hasattr(model, "n_iter_")


@pytest.mark.parametrize("optimizer", ["sgd", "adam", "simplex"])
def test_a_stacked_networks_history_has_the_entries_of_its_own_fit(optimizer):
    # The validation batches (their loss and size) and valid_batch_count were missing.
    X, y = visits(40)
    model = explicit(cell="gru", time_feature=None, optimizer=optimizer, max_iter=3, early_stopping=True,
                     validation_fraction=0.3, batch_size=8)
    (stacked,), (alone,) = stack_and_fit([model], [(X, y)])
    assert len(stacked.net_.history) == len(alone.net_.history)
    for mine, theirs in zip(stacked.net_.history, alone.net_.history):
        assert [key for key in mine if key != "dur"] == [key for key in theirs if key != "dur"]
        assert [list(batch) for batch in mine["batches"]] == [list(batch) for batch in theirs["batches"]]
        assert mine["valid_batch_count"] == theirs["valid_batch_count"] > 0
        np.testing.assert_allclose([b.get("valid_loss", 0.0) for b in mine["batches"]],
                                   [b.get("valid_loss", 0.0) for b in theirs["batches"]], atol=1e-5)


def test_a_search_trains_under_a_callers_no_grad_or_inference_mode():
    # fit trains with autograd whatever the caller's mode; the stacked search did not
    # ("does not require grad") (diff43 review).
    X, y = visits(40)
    search = RNNGridSearchCV(explicit(optimizer="adam", max_iter=2), {"spectral_radius": [0.9, 1.2]}, cv=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        expected = clone(search).fit(X, y).cv_results_["mean_test_score"]
        for mode in (torch.no_grad, torch.inference_mode):
            with mode():
                got = clone(search).fit(X, y).cv_results_["mean_test_score"]
            np.testing.assert_array_equal(got, expected)


def test_the_search_checks_x_y_groups_and_masks_in_the_estimators_words():
    # msel44: boolean masks were never checked (a mask over a panel's rows was cut short
    # to the instances and ran silently, or failed in numpy); X None, a generator or a
    # scalar met "object of type ... has no len()"; y or groups of another length met
    # "inconsistent numbers of samples: [24, 23]"; a scalar y or an empty X raw messages.
    import pandas as pd
    from sklearn.model_selection import GroupKFold

    X, y = visits(24)
    search = RNNGridSearchCV(explicit(max_iter=1), {"spectral_radius": [1.0]}, cv=2)
    with pytest.raises(TypeError, match=r"expected X to hold sequences.*got NoneType"):
        search.fit(None, y)
    with pytest.raises(TypeError, match=r"got generator .* Collect the sequences into a list first"):
        search.fit((x for x in X), y)
    with pytest.raises(ValueError, match=r"^y has 23 entries, but X has 24 sequences: pass one target per sequence"):
        search.fit(X, y[:-1])
    with pytest.raises(ValueError, match=r"^y is a scalar \(1\): expected one entry per sequence of X"):
        search.fit(X, 1)
    with pytest.raises(ValueError, match=r"^groups has 23 entries, but X has 24 sequences: pass one group label"):
        RNNGridSearchCV(explicit(max_iter=1), {"spectral_radius": [1.0]}, cv=GroupKFold(2)).fit(
            X, y, groups=np.arange(23))
    with pytest.raises(ValueError, match=r"^X is empty"):
        search.fit([], [])
    frames = [pd.DataFrame(x, columns=["day", "bili"]) for x in X[:20]]
    panel = pd.concat({f"p{i:02d}": frame for i, frame in enumerate(frames)}, names=["patient", "step"])
    rows = np.asarray(panel.index.get_level_values(0) < "p10")  # a mask over the panel's rows
    for labels in (y[:20], list(y[:20])):
        with pytest.raises(ValueError, match=rf"cv gave a boolean mask of shape \({len(panel)},\) in the train "
                                             r"part of split 0, but the panel X has 20 instances"):
            RNNGridSearchCV(explicit(max_iter=1, time_feature="day"), {"spectral_radius": [1.0]},
                            cv=[(rows, ~rows)]).fit(panel, labels)
    long_mask = np.zeros(40, bool)
    long_mask[::2] = True
    with pytest.raises(ValueError, match=r"cv gave a boolean mask of shape \(40,\) in the test part of split 0, "
                                         r"but X has 24 sequences"):
        RNNGridSearchCV(explicit(max_iter=1), {"spectral_radius": [1.0]},
                        cv=[(np.ones(24, bool), long_mask)]).fit(X, list(y))
