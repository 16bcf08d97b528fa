"""Class imbalance (issue 4): balanced mini-batches and imbalanced-learn samplers."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
from imblearn.over_sampling import RandomOverSampler
from imblearn.pipeline import make_pipeline as make_imblearn_pipeline
from imblearn.under_sampling import RandomUnderSampler
from sklearn.exceptions import ConvergenceWarning

from sklearn_rnn import RNNClassifier, SequenceStandardScaler
from sklearn_rnn.sequences import (
    BucketBatchLoader,
    FlatSequences,
    SequenceDataset,
    balanced_batches,
    bucket_batches,
    sequence_column,
)


def rare_positives(n=90, positives=10, seed=0):
    rng = np.random.default_rng(seed)
    y = np.zeros(n, dtype=int)
    y[rng.choice(n, positives, replace=False)] = 1
    X = [np.column_stack([np.cumsum(rng.uniform(1, 3, size=k)), rng.normal(size=(k, 1)) + y[i]])
         for i, k in enumerate(rng.integers(2, 12, size=n))]
    return X, y


def test_balanced_batches_hold_equal_class_counts():
    X, y = rare_positives()
    lengths = np.array([len(x) for x in X])
    batches = balanced_batches(lengths, y, 20, rng=np.random.default_rng(0))
    assert len(batches) == 5  # ceil(90 / 20): one epoch's worth of samples
    for batch in batches:
        assert np.bincount(y[batch], minlength=2).tolist() == [10, 10]
    drawn = np.concatenate(batches)
    assert len(np.unique(drawn[y[drawn] == 1])) <= 10 < (y[drawn] == 1).sum()  # with replacement


def test_balanced_batches_keep_lengths_bucketed():
    rng = np.random.default_rng(0)
    lengths = rng.integers(1, 200, size=2000)
    y = (rng.random(2000) < 0.2).astype(int)
    balanced = balanced_batches(lengths, y, 20, rng=np.random.default_rng(1))
    padding = np.mean([lengths[b].max() - lengths[b].mean() for b in balanced])
    random = [rng.choice(2000, 20) for _ in range(100)]
    random_padding = np.mean([lengths[b].max() - lengths[b].mean() for b in random])
    assert padding < 0.25 * random_padding


def test_balanced_batches_multiclass_and_seeded():
    y = np.repeat([0, 1, 2], [50, 7, 3])
    lengths = np.arange(60) % 9 + 1
    first = balanced_batches(lengths, y, 10, rng=np.random.default_rng(5))
    again = balanced_batches(lengths, y, 10, rng=np.random.default_rng(5))
    assert all(np.bincount(y[b]).tolist() == [3, 3, 3] for b in first)
    assert all(np.array_equal(a, b) for a, b in zip(first, again, strict=True))


def test_loader_draws_balanced_batches_from_the_dataset_labels():
    X, y = rare_positives()
    data = SequenceDataset(FlatSequences.from_arrays(X), torch.as_tensor(y))
    loader = BucketBatchLoader(data, 20, shuffle=True, random_state=np.random.default_rng(0),
                               balanced=True)
    batches = list(loader)
    assert len(batches) == len(loader) == 5
    assert all(target.bincount().tolist() == [10, 10] for _, target in batches)
    with pytest.raises(ValueError, match=r"balanced batches draw by one integer class label per sequence .*; got no "
                                         r"targets \(a dataset to predict\)\. Use balanced=False to predict\."):
        list(BucketBatchLoader(SequenceDataset(FlatSequences.from_arrays(X)), 20, balanced=True,
                               random_state=np.random.default_rng(0)))
    # Per-step targets were "y of shape None", told they were regression targets; no
    # sequence at all divided by zero classes (long43 review).
    steps = SequenceDataset(FlatSequences.from_arrays(X), FlatSequences.from_arrays([np.ones((len(x), 1)) for x in X]))
    with pytest.raises(ValueError, match=r"got per-step targets \(a FlatSequences of 90 sequences\)\. Use "
                                         r"balanced=False, or give one label per sequence\."):
        list(BucketBatchLoader(steps, 20, balanced=True, random_state=np.random.default_rng(0)))
    assert balanced_batches(np.array([], dtype=int), np.array([], dtype=int), 4, rng=np.random.default_rng(0)) == []
    with pytest.raises(ValueError, match="needs a numpy Generator"):
        BucketBatchLoader(data, 20, balanced=True).batches()
    plain = bucket_batches(np.array([len(x) for x in X]), 20)
    assert sorted(np.concatenate(plain).tolist()) == list(range(90))  # unchanged default


def test_classifier_trains_on_balanced_batches():
    X, y = rare_positives()
    params = dict(time_feature=0, hidden_size=6, max_iter=5, batch_size=20, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        balanced = RNNClassifier(balanced_batches=True, **params).fit(X, y)
        again = RNNClassifier(balanced_batches=True, **params).fit(X, y)
        plain = RNNClassifier(**params).fit(X, y)
    np.testing.assert_array_equal(balanced.predict_proba(X), again.predict_proba(X))
    # Positives weigh as much as negatives: the mean predicted probability of the rare
    # class is far above its share of 10 / 90.
    assert balanced.predict_proba(X)[:, 1].mean() > plain.predict_proba(X)[:, 1].mean()
    assert balanced.predict_proba(X)[:, 1].mean() > 0.3


def test_imbalanced_learn_sampler_pipeline_with_time_gaps():
    X, y = rare_positives()
    pipeline = make_imblearn_pipeline(
        RandomOverSampler(random_state=0),
        SequenceStandardScaler(),
        RNNClassifier(time_feature=0, hidden_size=6, max_iter=5, random_state=0),
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        pipeline.fit(sequence_column(X), y)
    assert pipeline.predict_proba(sequence_column(X)).shape == (90, 2)
    assert pipeline[-1].n_features_in_ == 2


def test_sample_weight_left_behind_by_a_sampler_says_why_it_no_longer_fits():
    # The sampler changes the number of sequences; the weights reach the estimator as given.
    X, y = rare_positives()
    pipeline = make_imblearn_pipeline(
        RandomUnderSampler(random_state=0), RNNClassifier(hidden_size=4, max_iter=2)
    )
    with pytest.raises(ValueError, match=r"shape \(90,\): expected \(20,\).*a sampler .*"
                       r"changed the number of sequences.*class_weight instead"):
        pipeline.fit(sequence_column(X), y, rnnclassifier__sample_weight=np.ones(90))


def test_partial_fit_refuses_balanced_class_weights_with_the_fix():
    # It balanced each call on its own: a call of one class was unweighted.
    rng = np.random.default_rng(0)
    X = [rng.normal(size=(4, 2)) for _ in range(20)]
    y = np.r_[np.zeros(18, int), np.ones(2, int)]
    model = RNNClassifier(hidden_size=3, class_weight="balanced", random_state=0)
    with pytest.raises(ValueError, match=r"partial_fit sees one call's data.*compute_class_weight"):
        model.partial_fit(X, y, classes=[0, 1])
    assert not hasattr(model, "net_")


def test_balanced_class_weight_still_works_where_the_whole_data_is_seen():
    # The refusal first sat in the shared preparation, so the diagnostics (which
    # prepare an unfitted estimator's batch) refused it too; a stream now refuses it
    # when built, not at its first update.
    from sklearn_rnn._stacked import StackedStream
    from sklearn_rnn.diagnostics import temporal_gradient_norms

    rng = np.random.default_rng(0)
    X = [rng.normal(size=(4, 2)) for _ in range(20)]
    y = np.r_[np.zeros(18, int), np.ones(2, int)]
    model = RNNClassifier(hidden_size=3, class_weight="balanced", readout="last", conv_kernels=None,
                          optimizer="simplex", cell="tanh", random_state=0)
    assert temporal_gradient_norms(model, X, y).norms.shape[-1] == 4
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        fitted = RNNClassifier(hidden_size=3, max_iter=2, random_state=0).partial_fit(X, y, classes=[0, 1])
    fitted.set_params(class_weight="balanced")
    with pytest.raises(ValueError, match="partial_fit sees one call's data"):
        StackedStream([fitted])


def test_a_class_weight_dict_made_for_all_the_data_serves_folds_missing_a_class():
    # A key absent from the training part's y was refused: every fold that misses a
    # class failed (scikit-learn ignores such keys). Keys of which none is a class stay
    # refused (labels of another type, say).
    from sklearn.model_selection import KFold, cross_val_score

    rng = np.random.default_rng(0)
    X = [rng.normal(size=(int(n), 2)) for n in rng.integers(3, 7, 12)]
    y = np.array([0] * 5 + [1] * 5 + [2] * 2)
    weights = {0: 1.0, 1: 1.0, 2: 5.0}
    model = RNNClassifier(hidden_size=4, max_iter=2, class_weight=weights, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        plain = RNNClassifier(hidden_size=4, max_iter=2, random_state=0).fit(X[:10], y[:10])
        np.testing.assert_array_equal(model.fit(X[:10], y[:10]).predict_proba(X), plain.predict_proba(X))
        assert np.isfinite(cross_val_score(model, X, y, cv=KFold(3))).all()
    with pytest.raises(ValueError, match=r"class_weight names labels \['0', '1'\], none of them a class of y"):
        model.set_params(class_weight={"0": 1.0, "1": 2.0}).fit(X, y)


def test_balanced_class_weight_counts_the_sample_weights_as_repeated_rows():
    """'balanced' counted the classes of y without their weights: count weights (what
    BaggingClassifier passes for its draws) trained another model than the same rows
    repeated (max |dproba| 0.22 here), where scikit-learn's LogisticRegression gives the
    same. The factors are now those of sklearn's compute_class_weight with the weights."""
    from sklearn.utils.class_weight import compute_class_weight

    rng = np.random.RandomState(0)
    X = [rng.randn(rng.randint(3, 9), 2) for _ in range(24)]
    y = np.r_[np.ones(8, int), np.zeros(16, int)]
    counts = np.r_[np.full(8, 3.0), np.ones(16)]
    rows = np.repeat(np.arange(24), counts.astype(int))

    def net():
        return RNNClassifier(hidden_size=4, max_iter=5, random_state=0, batch_size=1000, early_stopping=False,
                             label_smoothing=0.0, class_weight="balanced")

    repeated = net().fit([X[i] for i in rows], y[rows])
    weighted = net().fit(X, y, sample_weight=counts)
    np.testing.assert_allclose(weighted.predict_proba(X), repeated.predict_proba(X), atol=1e-6)
    factors = weighted._sample_weight(y, np.ones(24))[[0, -1]]  # a positive's and a negative's
    expected = compute_class_weight("balanced", classes=np.array([0, 1]), y=y)[[1, 0]]
    np.testing.assert_allclose(factors, expected)  # unit weights: the counts of y, as before
    with_counts = weighted._sample_weight(y, counts)[[0, -1]] / counts[[0, -1]]
    np.testing.assert_allclose(with_counts, compute_class_weight("balanced", classes=np.array([0, 1]), y=y,
                                                                 sample_weight=counts)[[1, 0]])


def test_partial_fit_calls_with_balanced_batches_draw_anew_each_call():
    # With an int random_state every call drew the same batches, with replacement: in
    # 20 calls on the same 40 sequences only 22 were ever trained on (engine40 review).
    from skorch.callbacks import Callback

    X = [np.full((3, 1), float(i)) for i in range(40)]
    y = np.arange(40) % 2
    drawn: list[list[float]] = []

    class Seen(Callback):  # the sequences of each training batch (sequence i is all i)
        def on_batch_begin(self, net, batch=None, training=False, **kwargs):
            if training:
                drawn.append(sorted(batch[0]["x"][:, 0, 0].tolist()))

    def stream(model, warm):
        calls = []
        for _ in range(20):
            drawn.clear()
            model.fit(X, y) if warm else model.partial_fit(X, y, classes=[0, 1])
            calls.append(list(drawn))
        return calls

    # Warm-started fits too: they restarted the stream from the seed (engine43 review).
    for warm in (False, True):
        make = lambda: RNNClassifier(hidden_size=4, batch_size=8, random_state=0, balanced_batches=True,
                                     max_iter=1, warm_start=warm, callbacks=[("seen", Seen())])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            calls = stream(make(), warm)
            assert calls[1] != calls[0]
            assert len({value for call in calls for batch in call for value in batch}) == 40
            assert stream(make(), warm) == calls  # still reproducible from the seed


def test_a_mistyped_class_weight_key_is_refused_when_a_class_goes_unweighted():
    # {'Sick': 10, 'healthy': 1} for labels sick/healthy trained the unweighted model
    # without a word; scikit-learn refuses it. Extra labels beside every class still pass.
    rng = np.random.default_rng(0)
    X = [rng.normal(size=(int(rng.integers(3, 10)), 2)) for _ in range(40)]
    y = np.where(np.arange(40) < 8, "sick", "healthy")
    with pytest.raises(ValueError, match=r"class_weight names labels \['Sick'\] that are no class of y, and gives no "
                                         r"weight to the classes \['sick'\] of y.*a mistyped key"):
        RNNClassifier(hidden_size=4, max_iter=1, class_weight={"Sick": 10.0, "healthy": 1.0}).fit(X, y)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        RNNClassifier(hidden_size=4, max_iter=1, class_weight={"sick": 10.0, "healthy": 1.0, "other": 3.0}).fit(X, y)


def test_the_early_stopping_hold_out_holds_every_class():
    # A class of 2 among 42 got no held-out sequence at validation_fraction=0.1: the
    # stopping rule and the validation scores ignored it, the class 'balanced' weighs
    # most, though the hold-out check promises one per class on each side (engine43).
    from skorch.callbacks import Callback

    rng = np.random.default_rng(0)
    y = np.array([0] * 20 + [1] * 20 + [2] * 2)
    X = [rng.normal(size=(3, 1)) + label for label in y]
    seen = {}

    class Peek(Callback):
        def on_train_begin(self, net, **kwargs):
            seen["valid"] = np.bincount(net.train_split.valid.y.cpu().numpy().astype(int), minlength=3)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        RNNClassifier(hidden_size=3, max_iter=2, random_state=0, early_stopping=True, class_weight="balanced",
                      callbacks=[("peek", Peek())]).fit(X, y)
    assert (seen["valid"] >= 1).all() and seen["valid"].sum() == 6
