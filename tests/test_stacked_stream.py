"""StackedStream: every estimator of a stream stacked is the estimator its own partial_fit calls train."""

import re
import warnings

import numpy as np
import pytest
import torch
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning
from skorch.callbacks import PrintLog

from sklearn_rnn import RNNClassifier, RNNRegressor
from sklearn_rnn._stacked import StackedStream, _Stack, check_stackable

CLASSES = np.arange(4)


def batch(rng, n=8, features=3, timed=False):
    """Ragged sequences of 5-9 steps with four classes read from their first and last steps."""
    X = [rng.normal(size=(k, features)) for k in rng.integers(5, 10, n)]
    if timed:
        X = [np.c_[np.cumsum(rng.uniform(1, 2, len(x))), x] for x in X]
    y = np.array([int(x[0, -1] > 0) + 2 * int(x[-1, -2] > 0) for x in X])
    return X, y


def thesis_models(optimizer, **changes):
    """Three estimators of the thesis' streaming settings, tiny, each with its own seed,
    spectral radius and clipping threshold."""
    params = dict(cell="tanh", hidden_size=6, optimizer=optimizer, batch_size=8, frame=1, readout="last",
                  conv_kernels=None, learning_rate=0.1, device="cpu")
    params.update(changes)
    return [RNNClassifier(**params, random_state=seed, spectral_radius=radius, clip_threshold=tau)
            for seed, radius, tau in [(0, 0.9, 0.5), (1, 1.2, 5.0), (2, 1.5, 0.1)]]


def largest_difference(a, b):
    return max(float((p - q).detach().abs().max())
               for p, q in zip(a.module_.parameters(), b.module_.parameters()) if p.numel())


def stream_and_alone(models, updates=5, seed=0, size=8, timed=False):
    """A first partial_fit of each model and of a clone of it, then ``updates`` fresh
    batches per model: streamed stacked for the models, by partial_fit for the clones."""
    rng = np.random.default_rng(seed)
    alone = [clone(model) for model in models]
    for model, copy in zip(models, alone):
        X, y = batch(rng, size, timed=timed)
        model.partial_fit(X, y, classes=CLASSES)
        copy.partial_fit(X, y, classes=CLASSES)
    stream = StackedStream(models)
    for _ in range(updates):
        batches = [batch(rng, size, timed=timed) for _ in models]
        losses = stream.update(batches)
        for copy, (X, y) in zip(alone, batches):
            copy.partial_fit(X, y)
        np.testing.assert_allclose(losses, [copy.loss_curve_[-1] for copy in alone], atol=1e-5)
    stream.write_back()
    return models, alone, rng


@pytest.mark.parametrize("optimizer", ["sgd", "simplex"])
def test_each_streamed_estimator_matches_its_own_partial_fit(optimizer):
    models, alone, rng = stream_and_alone(thesis_models(optimizer))
    X, _ = batch(rng, 30)
    for a, b in zip(models, alone):
        assert a.n_iter_ == b.n_iter_ == len(a.net_.history) == 6
        assert list(a.net_.history[-1]) == list(b.net_.history[-1])  # the same records
        # The stack's step loop in plain operations and partial_fit's fused kernel
        # differ by float32 rounding (measured: at most 1.2e-7 after 5 updates).
        assert largest_difference(a, b) < 1e-5
        np.testing.assert_allclose(a.loss_curve_, b.loss_curve_, atol=1e-5)
        np.testing.assert_allclose(a.predict_proba(X), b.predict_proba(X), atol=1e-5)
        np.testing.assert_array_equal(a.predict(X), b.predict(X))
        if optimizer == "simplex":
            # Each optimizer drew its convex weights from its own stream and counted its branches.
            opt_a, opt_b = a.net_.optimizer_, b.net_.optimizer_
            assert a.branch_counts_ == b.branch_counts_
            assert torch.equal(opt_a.generator.get_state(), opt_b.generator.get_state())
            assert opt_a.last_step["branch"] == opt_b.last_step["branch"]
    # The settings differ, so the networks do: the test can tell them apart.
    assert largest_difference(models[0], models[1]) > 1e-2
    # Written back, each estimator goes on by itself as its twin does.
    for a, b in zip(models, alone):
        X_next, y_next = batch(rng)
        a.partial_fit(X_next, y_next)
        b.partial_fit(X_next, y_next)
        assert largest_difference(a, b) < 1e-5


def test_streamed_adam_with_a_penalty_matches_its_own_partial_fit():
    """Adam's moments and step count are read from each optimizer and written back; the
    time-aware cell has parameters no gradient reaches (no missing inputs), which keep
    no Adam state, as with partial_fit."""
    models = thesis_models("adam", cell="decay", time_feature=0, alpha=1.0)
    models, alone, rng = stream_and_alone(models, timed=True)
    for a, b in zip(models, alone):
        assert a.n_iter_ == b.n_iter_ == 6
        assert "train_objective" in a.net_.history[-1] and list(a.net_.history[-1]) == list(b.net_.history[-1])
        # Adam divides by the root of the running squared gradient, which magnifies the
        # stack's rounding (batched products): measured at most 4.6e-6 after 5 updates.
        assert largest_difference(a, b) < 5e-5
        np.testing.assert_allclose(a.loss_curve_, b.loss_curve_, atol=1e-5)
        state_a, state_b = a.net_.optimizer_.state, b.net_.optimizer_.state
        parameters = list(zip(a.module_.parameters(), b.module_.parameters()))
        assert [p in state_a for p, _ in parameters] == [q in state_b for _, q in parameters]
        assert sum(p not in state_a for p, _ in parameters) > 0  # the decay of missing inputs
        for p, q in parameters:
            if q in state_b:
                assert float(state_a[p]["step"]) == float(state_b[q]["step"]) == 6
                np.testing.assert_allclose(state_a[p]["exp_avg"], state_b[q]["exp_avg"], atol=1e-5)


def test_a_batch_of_several_updates_and_sample_weights_match_partial_fit():
    """A batch larger than batch_size is one epoch of several updates, as in partial_fit;
    sample weights go with the batch."""
    models = thesis_models("sgd")
    alone = [clone(model) for model in models]
    rng = np.random.default_rng(3)
    for model, copy in zip(models, alone):
        X, y = batch(rng)
        model.partial_fit(X, y, classes=CLASSES)
        copy.partial_fit(X, y, classes=CLASSES)
    stream = StackedStream(models)
    sizes = [20, 8, 13]  # 3, 1 and 2 updates
    batches = [(*batch(rng, n), rng.uniform(0.5, 2.0, n)) for n in sizes]
    stream.update(batches)
    stream.write_back()
    for a, b, (X, y, weight) in zip(models, alone, batches):
        b.partial_fit(X, y, sample_weight=weight)
        assert a.net_.history[-1, "train_batch_count"] == b.net_.history[-1, "train_batch_count"]
        assert largest_difference(a, b) < 1e-5
        np.testing.assert_allclose(a.loss_curve_, b.loss_curve_, atol=1e-5)
    assert [a.net_.history[-1, "train_batch_count"] for a in models] == [3, 1, 2]


@pytest.mark.parametrize("optimizer", ["sgd", "simplex"])
def test_a_diverging_estimator_is_undone_as_partial_fit_undoes_it(optimizer):
    models = thesis_models(optimizer)
    # Unclipped steps of 1e38: the readout's weights reach about 1e37 in two calls, and
    # the third call's loss is infinite.
    models[1].set_params(learning_rate=1e38, clip_threshold=None)
    twin = clone(models[1])
    rng = np.random.default_rng(1)
    for model in models:
        first, second = batch(rng), batch(rng)
        model.partial_fit(*first, classes=CLASSES)
        model.partial_fit(*second)
        if model is models[1]:
            twin.partial_fit(*first, classes=CLASSES)
            twin.partial_fit(*second)
    before = [[p.detach().clone() for p in model.module_.parameters()] for model in models]
    batches = [batch(rng) for _ in models]
    with pytest.warns(ConvergenceWarning, match="the training loss became inf") as own:
        twin.partial_fit(*batches[1])  # its own partial_fit undoes the call
    stream = StackedStream(models)
    with pytest.warns(ConvergenceWarning, match=r"RNNClassifier \(estimator 1 of the stream\): the training loss "
                      "became inf in epoch 3, batch 1, so training stopped and the weights of epoch 2 are kept") as stacked:
        losses = stream.update(batches)
    # Worded as its own partial_fit words it (the stream left out the batch), and naming
    # which estimator of the stream was undone.
    assert [str(w.message).replace(" (estimator 1 of the stream)", "") for w in stacked] == [
        str(w.message) for w in own]
    stream.write_back()
    assert np.isnan(losses[1]) and np.isfinite(losses[[0, 2]]).all()
    assert [model.n_iter_ for model in models] == [3, 2, 3] and twin.n_iter_ == 2
    assert len(models[1].loss_curve_) == len(models[1].net_.history) == 2
    for p, q, r in zip(models[1].module_.parameters(), before[1], twin.module_.parameters()):
        assert torch.equal(p, q) and torch.equal(p, r)
    if optimizer == "simplex":  # the optimizer's state is the one the call started from, as the twin's
        opt_a, opt_b = models[1].net_.optimizer_, twin.net_.optimizer_
        assert torch.equal(opt_a.generator.get_state(), opt_b.generator.get_state())
        assert opt_a.branch_counts == opt_b.branch_counts and sum(opt_a.branch_counts.values()) == 2
    for model, old in zip(models[::2], before[::2]):  # the others moved
        assert not all(torch.equal(p, q) for p, q in zip(model.module_.parameters(), old))
    # The stream goes on: the next call of the others is taken, the diverging one's undone again.
    with pytest.warns(ConvergenceWarning):
        stream.update([batch(rng) for _ in models])
    assert [model.n_iter_ for model in models] == [4, 2, 4]


def test_an_exploding_gradient_takes_the_clipped_step_as_partial_fit_does():
    # The stream's clipped SGD took the gradient norm as a float32 sum of squares, which
    # overflowed though every entry was finite, and skipped the step: the estimator stayed
    # where it was, while its own partial_fit takes the clipped step of eq. 3.6.
    rng = np.random.default_rng(0)
    X, y = batch(rng, 12)
    X = [x * 1e20 for x in X]
    model = RNNClassifier(cell="relu", hidden_size=4, optimizer="sgd", learning_rate=0.1, clip_threshold=1.0,
                          instance_norm=False, random_state=0, device="cpu").partial_fit(X, y, classes=CLASSES)
    twin = clone(model).partial_fit(X, y, classes=CLASSES)
    stream = StackedStream([model])
    for _ in range(3):
        stream.update([(X, y)])
        twin.partial_fit(X, y)
    stream.write_back()
    assert twin.net_.optimizer_.skipped_steps == 0 and twin.loss_curve_[-1] < 0.5 * twin.loss_curve_[1]
    np.testing.assert_allclose(model.loss_curve_, twin.loss_curve_, rtol=1e-4)
    assert largest_difference(model, twin) < 1e-6


def test_a_non_finite_gradient_is_skipped_and_counted_as_clipped_sgd_skips_it(monkeypatch):
    # The stack's step of 0 for such a network wrote 0 * inf = NaN into its weights; the
    # update was then undone as a divergence, where ClippedSGD skips the step, counts it
    # in skipped_steps and goes on.
    models = fitted(thesis_models("sgd")[:2])
    twin = clone(models[0])
    fitted([twin])
    stack = StackedStream(models)._stack
    before = stack.flat.clone()
    grad = torch.full_like(stack.flat, 0.01)
    grad[0, 0] = float("inf")
    stack.rule.apply(stack, grad, torch.tensor([True, True]))
    assert torch.equal(stack.flat[0], before[0]) and not torch.equal(stack.flat[1], before[1])
    assert [model.net_.optimizer_.skipped_steps for model in models] == [1, 0]
    # The same gradient through its own ClippedSGD.
    parameters = [p for p in twin.module_.parameters() if p.requires_grad]
    for p, g in zip(parameters, torch.split(grad[0], [p.numel() for p in parameters])):
        p.grad = g.view_as(p).clone()
    twin.net_.optimizer_.step()
    assert twin.net_.optimizer_.skipped_steps == 1 and largest_difference(twin, models[0]) == 0.0

    # In a stream: network 0's every step is skipped, its epoch recorded, the other trains.
    models = fitted(thesis_models("sgd")[:2])
    stream = StackedStream(models)
    weights = [p.detach().clone() for p in models[0].module_.parameters()]
    apply = type(stream._stack.rule).apply

    def overflowing(self, stack, grad, active):
        grad[0, 0] = float("inf")
        apply(self, stack, grad, active)

    monkeypatch.setattr(type(stream._stack.rule), "apply", overflowing)
    rng = np.random.default_rng(7)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        losses = stream.update([batch(rng, 16) for _ in models])  # two steps each
    stream.write_back()
    assert np.isfinite(losses).all() and [model.n_iter_ for model in models] == [2, 2]
    assert all(torch.equal(p, q) for p, q in zip(models[0].module_.parameters(), weights))
    assert [model.net_.optimizer_.skipped_steps for model in models] == [2, 0]


def test_weights_that_become_non_finite_are_undone_with_the_optimizer_state(monkeypatch):
    """A step that leaves non-finite weights (with a finite loss) is undone with the
    optimizer's random stream and branch counts, as partial_fit's guard restores them."""
    models = fitted(thesis_models("simplex"))
    stream = StackedStream(models)
    generators = [model.net_.optimizer_.generator.get_state() for model in models]
    counts = [model.branch_counts_ for model in models]
    before = [p.detach().clone() for p in models[1].module_.parameters()]
    step = _Stack._simplex_step

    def overflowing(self, rows, *args):
        step(self, rows, *args)
        self.flat[1, 0] = float("inf")  # as if network 1's step had overflowed

    monkeypatch.setattr(_Stack, "_simplex_step", overflowing)
    rng = np.random.default_rng(7)
    with pytest.warns(ConvergenceWarning, match="the weights became non-finite in epoch 2, so training "
                      "stopped and the weights of epoch 1 are kept"):
        losses = stream.update([batch(rng) for _ in models])
    stream.write_back()
    assert np.isnan(losses[1]) and [model.n_iter_ for model in models] == [2, 1, 2]
    assert all(torch.equal(p, q) for p, q in zip(models[1].module_.parameters(), before))
    assert torch.equal(models[1].net_.optimizer_.generator.get_state(), generators[1])
    assert models[1].branch_counts_ == counts[1]
    for model, generator, count in zip(models[::2], generators[::2], counts[::2]):  # stepped
        assert not torch.equal(model.net_.optimizer_.generator.get_state(), generator)
        assert sum(model.branch_counts_.values()) == sum(count.values()) + 1


def test_a_stream_of_regressors():
    rng = np.random.default_rng(2)
    models = [RNNRegressor(cell="tanh", hidden_size=5, optimizer="sgd", batch_size=8, frame=1,
                           readout="last", conv_kernels=None, random_state=seed, device="cpu")
              for seed in (0, 1)]
    alone = [clone(model) for model in models]

    def data():
        X, _ = batch(rng)
        return X, np.array([x[:, 0].sum() for x in X])

    for model, copy in zip(models, alone):
        X, y = data()
        model.partial_fit(X, y)
        copy.partial_fit(X, y)
    stream = StackedStream(models)
    for _ in range(3):
        batches = [data() for _ in models]
        stream.update(batches)
        for copy, (X, y) in zip(alone, batches):
            copy.partial_fit(X, y)
    for a, b in zip(stream.write_back(), alone):
        assert a.n_iter_ == 4 and largest_difference(a, b) < 1e-5


def fitted(models, seed=0):
    rng = np.random.default_rng(seed)
    for model in models:
        model.partial_fit(*batch(rng), classes=CLASSES)
    return models


@pytest.mark.parametrize("make, match", [
    (lambda: fitted(thesis_models("sgd")[:2] + thesis_models("sgd", hidden_size=7)[:1]),
     r"estimator 2 differs from estimator 0 in its parameter shapes"),
    (lambda: fitted(thesis_models("sgd")[:1] + thesis_models("simplex")[:1]),
     r"estimator 1 differs from estimator 0 in its optimizer \(SimplexSGD against ClippedSGD\)"),
    (lambda: fitted(thesis_models("sgd")[:1] + thesis_models("sgd", label_smoothing=0.0)[:1]),
     r"estimator 1 differs from estimator 0 in its loss \('CrossEntropyLoss\(label_smoothing=0.0\)' "
     r"against 'CrossEntropyLoss\(label_smoothing=0.1\)'\)"),
    (lambda: fitted(thesis_models("sgd")[:1] + thesis_models("sgd", bidirectional=True)[:1]),
     r"estimator 1 differs from estimator 0 in its bidirectional \(True against False\)"),
    (lambda: fitted(thesis_models("sgd")[:1]) + thesis_models("sgd")[:1],
     r"estimator 1 \(RNNClassifier\) has no network yet: call its partial_fit once"),
    (lambda: 2 * fitted(thesis_models("sgd")[:1]), r"estimator 1 is the same object as an earlier one"),
    (lambda: fitted(thesis_models("sgd", dropout=0.2)[:1]),
     r"^estimator 0: RNNClassifier\(dropout=0.2\) cannot be stacked: .*; or train this RNNClassifier with its own "
     r"partial_fit, out of the stream\.$"),
    (lambda: [], r"at least one estimator"),
])
def test_refuses_estimators_it_cannot_stream_together(make, match):
    with pytest.raises(ValueError, match=match):
        StackedStream(make())


def test_a_pipeline_is_refused_for_what_it_is():
    # It was told to call partial_fit, which a pipeline does not have.
    from sklearn.pipeline import make_pipeline

    from sklearn_rnn import SequenceStandardScaler

    pipeline = make_pipeline(SequenceStandardScaler(), thesis_models("sgd")[0])
    with pytest.raises(TypeError, match=r"^StackedStream trains RNNClassifier and RNNRegressor estimators; "
                                        r"estimator 0 is a Pipeline\. Pass the network estimator itself"):
        StackedStream([pipeline])


@pytest.mark.parametrize("changes, second, first", [
    (dict(readout="pool"), "readout.weight: (4, 18) against (4, 6)", "readout.weight: (4, 6) against (4, 18)"),
    (dict(num_layers=2), "upper_layers.0.input_projection.weight (6, 6): in estimator 1 only",
     "upper_layers.0.input_projection.weight (6, 6): in estimator 0 only"),
    (dict(hidden_init="learned"), "initial_hidden (1, 6): in estimator 1 only",
     "initial_hidden (1, 6): in estimator 0 only"),
])
def test_an_architecture_refusal_names_the_first_parameter_whose_shape_differs(changes, second, first):
    # The shapes were shown cut at 117 characters, before the first that differs: both
    # sides of the message read the same.
    for models, difference in [(thesis_models("sgd")[:1] + thesis_models("sgd", **changes)[:1], second),
                               (thesis_models("sgd", **changes)[:1] + thesis_models("sgd")[:1], first)]:
        with pytest.raises(ValueError, match=re.escape(f"in its parameter shapes ({difference}). Stream")):
            StackedStream(fitted(models))


def test_refuses_a_label_smoothing_changed_on_one_estimator_of_the_stream():
    models = fitted(thesis_models("sgd"))
    stream = StackedStream(models)
    models[1].set_params(label_smoothing=0.3)
    rng = np.random.default_rng(5)
    with pytest.raises(ValueError, match=r"estimator 1 now has label_smoothing=0.3 against estimator 0's 0.1"):
        stream.update([batch(rng) for _ in models])
    models[1].set_params(label_smoothing=0.1)  # the same value again: the stream goes on
    assert np.isfinite(stream.update([batch(rng) for _ in models])).all()


@pytest.mark.parametrize("change, match", [
    (dict(class_weight="balanced"), r"class_weight='balanced' balances the classes of the data fit sees whole"),
    (dict(callbacks=[("print", PrintLog())]), r"callbacks=.* cannot be stacked: the stacked trainer runs none"),
    (dict(precision="bfloat16"), r"precision='bfloat16'\) cannot be stacked: mixed precision is not stacked"),
])
def test_refuses_a_setting_changed_since_the_stream_was_built_that_cannot_be_stacked(change, match):
    # Checked only when the stream was built: 'balanced' batches were balanced one by one,
    # callbacks skipped without a word, bfloat16 trained in float32.
    models = fitted(thesis_models("sgd"))
    stream = StackedStream(models)
    weights = [p.detach().clone() for p in models[1].module_.parameters()]
    before = {key: models[1].get_params()[key] for key in change}
    models[1].set_params(**change)
    with pytest.raises(ValueError, match=match) as refused:
        check_stackable(models[1], streaming=True)
    rng = np.random.default_rng(5)
    with pytest.raises(ValueError, match=match) as updated:
        stream.update([batch(rng) for _ in models])
    assert str(updated.value) == f"estimator 1: {refused.value}"  # it names the stream's estimator
    stream.write_back()
    assert [model.n_iter_ for model in models] == [1, 1, 1]
    assert all(torch.equal(p, q) for p, q in zip(models[1].module_.parameters(), weights))
    models[1].set_params(**before)  # set back: the stream goes on
    assert np.isfinite(stream.update([batch(rng) for _ in models])).all()


def test_refuses_a_parameter_value_that_fit_refuses():
    # Not validated, as partial_fit was not: the stream trained with a step size of -0.5.
    models = fitted(thesis_models("sgd"))
    stream = StackedStream(models)
    models[1].set_params(learning_rate=-0.5)
    with pytest.raises(ValueError, match=r"The 'learning_rate' parameter of RNNClassifier must be a float "
                       r"in the range \(0.0, inf\).* Got -0.5 instead."):
        stream.update([batch(np.random.default_rng(5)) for _ in models])
    assert [model.n_iter_ for model in models] == [1, 1, 1]
    assert models[1].net_.optimizer_.param_groups[0]["lr"] == 0.1


def test_refuses_batches_that_do_not_fit_the_stream():
    models = fitted(thesis_models("sgd"))
    stream = StackedStream(models)
    rng = np.random.default_rng(5)
    with pytest.raises(ValueError, match=r"one batch .* per estimator: 3 for this stream; got 2 batches"):
        stream.update([batch(rng) for _ in range(2)])
    with pytest.raises(ValueError, match=r"batch 1 must be a tuple \(X, y\) or \(X, y, sample_weight\)"):
        stream.update([batch(rng), batch(rng)[0], batch(rng)])
    X, y = batch(rng)
    with pytest.raises(ValueError, match="features"):  # the estimator's own check of X
        stream.update([batch(rng), ([x[:, :2] for x in X], y), batch(rng)])
    assert [model.n_iter_ for model in models] == [1, 1, 1]  # nothing was trained
    # An estimator trained outside the stream makes its stacked state stale.
    stream.write_back()
    models[2].partial_fit(*batch(rng))
    with pytest.raises(ValueError, match=r"estimator 2 was trained outside this stream"):
        stream.update([batch(rng) for _ in models])


def test_refuses_an_estimator_fitted_outside_the_stream_with_as_many_epochs():
    # fit built a new network whose history was as long as the one the stream left: the
    # update trained the stale stacked weights, recorded in the new history, and
    # write_back copied them over the fit's.
    models = fitted(thesis_models("sgd", max_iter=2, early_stopping=False)[:2])
    stream = StackedStream(models)
    rng = np.random.default_rng(5)
    stream.update([batch(rng) for _ in models])
    stream.write_back()
    with pytest.warns(ConvergenceWarning, match="reached max_iter=2"):
        models[0].fit(*batch(rng, 32))  # two epochs, as the stream left it
    assert len(models[0].net_.history) == 2
    weights = [p.detach().clone() for p in models[0].module_.parameters()]
    with pytest.raises(ValueError, match=r"estimator 0 was trained outside this stream \(its network is not the "
                       r"one the stream was built on: fit builds a new one\); its weights in the stack are stale"):
        stream.update([batch(rng) for _ in models])
    assert all(torch.equal(p, q) for p, q in zip(models[0].module_.parameters(), weights))
    assert models[0].n_iter_ == 2 and models[1].n_iter_ == 2


def test_a_refused_update_leaves_every_estimator_as_it_was():
    # Estimator 0 was prepared (drawing from its RandomState) before estimator 1's batch
    # was refused: its later training differed from an untouched stream's by 1.6e-3.
    def run(refused_first):
        rng = np.random.default_rng(0)
        models = thesis_models("sgd", batch_size=3)[:2]
        for model, seed in zip(models, (0, 1)):
            model.set_params(random_state=np.random.RandomState(seed))
        fitted(models)
        stream = StackedStream(models)
        batches = [batch(rng) for _ in models]
        if refused_first:
            X, y = batches[1]
            with pytest.raises(ValueError, match="y has 7 entries, but X has 8 sequences"):
                stream.update([batches[0], (X, y[:-1])])
            models[1].set_params(label_smoothing=0.3)
            with pytest.raises(ValueError, match="label_smoothing=0.3"):
                stream.update(batches)
            models[1].set_params(label_smoothing=0.1)
        stream.update(batches)
        stream.write_back()
        return models

    for clean, after in zip(run(False), run(True)):
        assert largest_difference(clean, after) == 0.0


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("optimizer", ["sgd", "simplex"])
def test_a_stream_on_cuda_matches_partial_fit_on_cuda(optimizer):
    # partial_fit runs cuDNN's fused recurrence, whose matrix products PyTorch lets use
    # TF32 (10-bit mantissas) by default; the stack runs plain float32 products. The
    # comparison is of float32 with float32 (on an H100 with TF32 allowed, the losses
    # parted by up to 3.6e-5 after three updates).
    with torch.backends.cudnn.flags(enabled=True, allow_tf32=False):
        models, alone, _ = stream_and_alone(thesis_models(optimizer, device="cuda"), updates=3)
    for a, b in zip(models, alone):
        assert next(a.module_.parameters()).is_cuda
        assert largest_difference(a, b) < 1e-5


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_an_adam_stream_written_back_on_cuda_trains_on_alone():
    # The estimators' Adam on a GPU is fused: its step count must be on the GPU after
    # write_back, or the next partial_fit fails (a step count left on the CPU did).
    models = fitted(thesis_models("adam", device="cuda"))
    stream = StackedStream(models)
    rng = np.random.default_rng(3)
    stream.update([batch(rng) for _ in models])
    stream.write_back()
    for model in models:
        steps = [state["step"] for state in model.net_.optimizer_.state.values()]
        assert steps and all(step.device == next(model.module_.parameters()).device for step in steps)
        model.partial_fit(*batch(rng))
        assert np.isfinite(model.loss_curve_[-1])


@pytest.mark.parametrize("optimizer", ["sgd", "simplex", "adam"])
def test_an_update_interrupted_mid_epoch_leaves_every_estimator_as_it_was(optimizer, monkeypatch):
    # A Ctrl-C on the call's second update step left the first step in the stack (and
    # Adam's moments, the simplex streams and branch counts advanced): the next update
    # went on from weights that no series of partial_fit calls gives (by 3e-2).
    def run(interrupted):
        rng = np.random.default_rng(0)
        models = thesis_models(optimizer, batch_size=4)[:2]
        for model, seed in zip(models, (0, 1)):
            model.set_params(random_state=np.random.RandomState(seed))
        fitted(models)
        stream = StackedStream(models)
        batches = [batch(rng, 16) for _ in models]  # four update steps each
        if interrupted:
            lr = [model.net_.optimizer_.param_groups[0]["lr"] for model in models]
            weights = [[p.detach().clone() for p in model.module_.parameters()] for model in models]
            update, calls = _Stack._update, []

            def ctrl_c(self, *args):
                calls.append(1)
                if len(calls) == 2:
                    raise KeyboardInterrupt
                return update(self, *args)

            with monkeypatch.context() as patch:
                patch.setattr(_Stack, "_update", ctrl_c)
                models[1].set_params(learning_rate=0.3)  # this call's setting, put back with it
                with pytest.raises(KeyboardInterrupt):
                    stream.update(batches)
                models[1].set_params(learning_rate=0.1)
            assert [model.n_iter_ for model in models] == [1, 1]
            assert [model.net_.optimizer_.param_groups[0]["lr"] for model in models] == lr
            for model, old in zip(stream.write_back(), weights):
                assert all(torch.equal(p, q) for p, q in zip(model.module_.parameters(), old))
        stream.update(batches)
        return stream.write_back()

    for clean, after in zip(run(False), run(True)):
        assert clean.n_iter_ == after.n_iter_ == 2
        assert largest_difference(clean, after) == 0.0
        assert clean.random_state.get_state()[2] == after.random_state.get_state()[2]
        opt_a, opt_b = clean.net_.optimizer_, after.net_.optimizer_
        if optimizer == "simplex":
            assert torch.equal(opt_a.generator.get_state(), opt_b.generator.get_state())
            assert opt_a.branch_counts == opt_b.branch_counts
        if optimizer == "adam":
            for p, q in zip(clean.module_.parameters(), after.module_.parameters()):
                if p in opt_a.state:
                    assert float(opt_a.state[p]["step"]) == float(opt_b.state[q]["step"]) == 6  # 2 + 4 steps
                    assert torch.equal(opt_a.state[p]["exp_avg_sq"], opt_b.state[q]["exp_avg_sq"])


def test_a_stream_built_or_written_back_under_inference_mode_trains_and_names_refused_batches():
    # stacked45 1-3: a stream built under torch.inference_mode held inference tensors, so
    # every update failed (its rollback too); write_back under it gave an Adam estimator
    # inference-tensor moments its next partial_fit could not step; a batch partial_fit
    # refuses, and the divergence warning's advice on huge weights, named no estimator.
    rng = np.random.default_rng(0)
    models = [clone(model).set_params(optimizer="adam") for model in thesis_models("sgd")[:2]]
    for model in models:
        model.partial_fit(*batch(rng), classes=CLASSES)
    with torch.inference_mode():
        stream = StackedStream(models)
    losses = stream.update([batch(rng), batch(rng)])
    assert np.isfinite(losses).all() and [model.n_iter_ for model in models] == [2, 2]
    with torch.inference_mode():
        stream.write_back()
    models[0].partial_fit(*batch(rng))  # its Adam state steps on
    assert models[0].n_iter_ == 3
    stream = StackedStream(models)
    X, y = batch(rng)
    with pytest.raises(ValueError, match=r"^batch 1 \(estimator 1\): sample_weight holds negative values"):
        stream.update([batch(rng), (X, y, -np.ones(len(y)))])
    with pytest.warns(ConvergenceWarning, match=r"estimator 1 of the stream\): the training loss became inf.*"
                                                r"The sample weights reach 3e\+38"):
        losses = stream.update([batch(rng), (X, y, np.full(len(y), 3e38))])
    assert np.isfinite(losses[0]) and np.isnan(losses[1])
