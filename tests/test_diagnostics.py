"""Temporal-gradient diagnostics and the figures 3.1-3.3 helper."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from sklearn.base import clone  # noqa: E402

from sklearn_rnn.diagnostics import (  # noqa: E402
    TemporalGradientNorms,
    plot_temporal_gradient_norms,
    temporal_gradient_norms,
)
from sklearn_rnn.nn import RecurrentNetwork  # noqa: E402
from sklearn_rnn.optim import temporal_gradients  # noqa: E402


def batch(n=12, steps=9, features=3, seed=0):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(n, steps, features, generator=gen)
    lengths = torch.randint(1, steps + 1, (n,), generator=gen)
    lengths[0] = steps
    return x, lengths, gen


def network(rho=1.2, outputs=3, seed=1):
    gen = torch.Generator().manual_seed(seed)
    return RecurrentNetwork(3, 10, outputs, spectral_radius=rho, generator=gen)


def test_fresh_network_padded_batch_classification():
    x, lengths, gen = batch()
    y = torch.randint(0, 3, (12,), generator=gen)
    net = network()
    before = {k: v.clone() for k, v in net.state_dict().items()}
    stats = temporal_gradient_norms(net, x, y, lengths=lengths)

    assert isinstance(stats, TemporalGradientNorms)
    assert stats.alignment == "last"
    np.testing.assert_array_equal(stats.steps, np.arange(1, 10))
    np.testing.assert_array_equal(stats.counts, [(lengths >= 9 - s).sum().item() for s in range(9)])
    # The same numbers as the optimizer's temporal gradients, with the loss spelled out.
    states = net.forward_states(x, lengths)
    tg = temporal_gradients(net, states, F.cross_entropy(states.outputs, y), lengths, accumulate_grad=False)
    np.testing.assert_allclose(stats.norms, tg.norms().numpy(), rtol=1e-6)
    np.testing.assert_allclose(stats.cosines, tg.cosines().numpy(), rtol=1e-5, atol=1e-7)
    per_step = tg.per_step()
    for name, block in zip(tg.names, per_step):
        np.testing.assert_allclose(stats.parameter_norms[name], block.reshape(9, -1).norm(dim=1), rtol=1e-5)
    assert stats.parameter_norms["W_rec"][0] == 0.0  # h_0 = 0
    assert stats.parameter_norms["W_out"][:-1].max() == 0.0  # the readout sits at the loss step
    assert np.all(np.abs(stats.cosines) <= 1 + 1e-6)
    assert stats.gradient_norm == pytest.approx(tg.gradient_norm, rel=1e-6)
    assert stats.loss == pytest.approx(float(tg.loss))
    # Nothing changed on the network.
    assert all(torch.equal(before[k], v) for k, v in net.state_dict().items())
    assert all(p.grad is None for p in net.parameters())


def test_regression_numpy_inputs_and_full_lengths():
    x, _, gen = batch()
    y = torch.randn(12, generator=gen)
    net = network(outputs=1)
    stats = temporal_gradient_norms(net, x.numpy(), y.numpy())
    states = net.forward_states(x, torch.full((12,), 9))
    loss = 0.5 * (states.outputs[:, 0] - y).square().mean()
    tg = temporal_gradients(net, states, loss, torch.full((12,), 9), accumulate_grad=False)
    np.testing.assert_allclose(stats.norms, tg.norms().numpy(), rtol=1e-6)
    assert stats.counts.tolist() == [12] * 9


def test_every_step_ignores_padded_targets():
    x, lengths, gen = batch()
    y = torch.randn(12, 9, 3, generator=gen)
    garbage = y.clone()
    garbage[torch.arange(9)[None, :] >= lengths[:, None]] = 1e6
    net = network()
    clean = temporal_gradient_norms(net, x, y, lengths=lengths, every_step=True)
    noisy = temporal_gradient_norms(net, x, garbage, lengths=lengths, every_step=True)
    assert clean.alignment == "absolute"
    np.testing.assert_allclose(clean.norms, noisy.norms, rtol=1e-6)
    assert clean.parameter_norms["W_out"].min() > 0  # a readout at every step



@pytest.mark.parametrize("classification", [False, True])
def test_the_default_every_step_loss_selects_the_valid_steps(classification):
    """An output at a padded step that is not finite (an overflowed state) leaves the
    default per-step loss as it is: selected away, not multiplied by zero."""
    from sklearn_rnn.diagnostics import _default_loss

    lengths = torch.tensor([4, 2])
    outputs = torch.randn(2, 4, 3, generator=torch.Generator().manual_seed(0))
    y = torch.zeros(2, 4, dtype=torch.long) if classification else torch.zeros(2, 4, 3)
    loss = _default_loss(y, lengths, every_step=True)
    expected = loss(outputs, y)
    outputs[1, 2:] = float("inf")
    assert float(loss(outputs, y)) == float(expected)

def test_custom_loss():
    x, lengths, gen = batch()
    y = torch.randint(0, 3, (12,), generator=gen)
    net = network()
    doubled = temporal_gradient_norms(net, x, y, lengths=lengths, loss=lambda o, t: 2 * F.cross_entropy(o, t))
    plain = temporal_gradient_norms(net, x, y, lengths=lengths)
    np.testing.assert_allclose(doubled.norms, 2 * plain.norms, rtol=1e-5)
    np.testing.assert_allclose(doubled.cosines, plain.cosines, rtol=1e-4, atol=1e-6)


def test_spectral_radius_above_one_keeps_distant_steps():
    x, _, gen = batch(n=50, steps=40)
    y = torch.randint(0, 3, (50,), generator=gen)
    ratio = {rho: (lambda s: s.norms[0] / s.norms[-1])(temporal_gradient_norms(network(rho), x, y))
             for rho in (0.6, 1.2)}
    assert ratio[0.6] < 1e-6 < ratio[1.2]


def test_errors():
    x, lengths, gen = batch()
    y = torch.randint(0, 3, (12,), generator=gen)

    class FittedEstimatorLike:
        module_ = network()

    with pytest.raises(TypeError, match="takes an RNNClassifier, RNNRegressor or RNNStepClassifier"):
        temporal_gradient_norms(FittedEstimatorLike(), x, y)
    from sklearn.pipeline import make_pipeline

    from sklearn_rnn import RNNClassifier, SequenceStandardScaler

    with pytest.raises(TypeError, match=r"pass its last step .*pipe\[:-1\]\.transform\(X\)"):
        temporal_gradient_norms(make_pipeline(SequenceStandardScaler(), RNNClassifier()), x, y)
    with pytest.raises(ValueError, match=r"\(n_sequences, n_steps, n_features\)"):
        temporal_gradient_norms(network(), x[0], y)
    with pytest.raises(ValueError, match="one target per sequence"):
        temporal_gradient_norms(network(), x, y[:5])
    with pytest.raises(ValueError, match="lengths must lie between 1 and the padded length 9"):
        temporal_gradient_norms(network(), x, y, lengths=lengths + 5)


def test_plot_figure_3_1_several_radii():
    x, _, gen = batch(n=20, steps=15)
    y = torch.randint(0, 3, (20,), generator=gen)
    results = {f"rho={rho}": temporal_gradient_norms(network(rho), x, y) for rho in (0.8, 1.0, 1.2)}
    ax = plot_temporal_gradient_norms(results, title="Figure 3.1")
    assert ax.get_yscale() == "log"
    assert [line.get_label() for line in ax.get_lines()] == list(results)
    np.testing.assert_allclose(ax.get_lines()[2].get_ydata(), results["rho=1.2"].norms)
    assert ax.get_title() == "Figure 3.1"
    plt.close("all")


def test_plot_figures_3_2_3_3_with_cosines_on_given_axes():
    x, lengths, gen = batch()
    y = torch.randint(0, 3, (12,), generator=gen)
    stats = temporal_gradient_norms(network(), x, y, lengths=lengths)
    fig, axes = plt.subplots(2, 2)
    returned = plot_temporal_gradient_norms(stats, cosines=True, ax=axes[:, 0])
    assert len(returned) == 2 and returned[0] is axes[0, 0] and returned[1] is axes[1, 0]
    np.testing.assert_allclose(axes[1, 0].get_lines()[0].get_ydata(), stats.cosines)
    assert axes[0, 0].get_legend() is None  # a single unlabeled result
    with pytest.raises(ValueError, match="ax must hold 2 Axes"):
        plot_temporal_gradient_norms(stats, cosines=True, ax=axes[0, 1])
    with pytest.raises(TypeError, match="TemporalGradientNorms"):
        plot_temporal_gradient_norms({"a": stats.norms})
    plt.close("all")


def test_estimators_fitted_and_unfitted_are_accepted():
    import warnings

    from sklearn.exceptions import ConvergenceWarning

    from sklearn_rnn import RNNClassifier
    from sklearn_rnn.datasets import make_temporal_order

    X, y = make_temporal_order(100, 50, random_state=0)
    ratios = {}
    for rho in (0.8, 1.2):
        estimator = RNNClassifier(cell="tanh", spectral_radius=rho, readout="last", conv_kernels=None,
                                  random_state=0)
        stats = temporal_gradient_norms(estimator, X, y)
        assert not hasattr(estimator, "net_")  # it stays unfitted
        ratios[rho] = stats.norms[0] / stats.norms[-1]
    assert ratios[0.8] < 1e-4 < ratios[1.2]  # figure 3.1: rho < 1 lets early gradients vanish
    fitted = RNNClassifier(hidden_size=8, max_iter=1, readout="last", conv_kernels=None, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        fitted.fit(X, y)
    stats = temporal_gradient_norms(fitted, X, y)
    assert stats.norms.shape == (max(len(x) for x in X),)
    assert np.isfinite(stats.cosines).all()
    with pytest.raises(ValueError, match="readout='last'"):  # the default pooled readout
        temporal_gradient_norms(RNNClassifier(hidden_size=8, random_state=0), X, y)
    with pytest.raises(ValueError, match="not a convolutional input stage"):  # the default stage
        temporal_gradient_norms(RNNClassifier(hidden_size=8, readout="last", random_state=0), X, y)


@pytest.mark.parametrize("class_weight", ["balanced", {0: 1.0, 1: 10.0}])
def test_an_estimators_loss_weighs_the_classes_as_fit_does(class_weight):
    """The measured loss is the training loss: class_weight's weights scaled to a mean of
    1, as fit weighs them. A fitted model's was unweighted; an unfitted one's took the
    weights as given, so that weights ten times larger gave a loss ten times larger."""
    import warnings

    from sklearn.exceptions import ConvergenceWarning
    from sklearn.utils.class_weight import compute_sample_weight

    from sklearn_rnn import RNNClassifier

    rng = np.random.default_rng(0)
    X = [rng.normal(size=(int(n), 2)) for n in rng.integers(3, 8, size=40)]
    y = np.array([int(x[-1, 0] > 0.8) for x in X])
    params = dict(hidden_size=4, max_iter=1, readout="last", label_smoothing=0.0, random_state=0)
    model = RNNClassifier(class_weight=class_weight, **params)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        fitted = clone(model).fit(X, y)
    weight = compute_sample_weight(class_weight, y)
    weight = weight / weight.mean()
    log_proba = fitted.predict_log_proba(X)[np.arange(len(y)), y]
    measured = temporal_gradient_norms(fitted, X, y).loss
    np.testing.assert_allclose(measured, -(weight * log_proba).mean(), rtol=1e-5)
    assert abs(measured + log_proba.mean()) > 0.01  # the unweighted loss is another number
    if isinstance(class_weight, dict):  # unfitted: only the ratios count, as in fit
        scaled = model.set_params(class_weight={label: 10 * value for label, value in class_weight.items()})
        unfitted = RNNClassifier(class_weight=class_weight, **params)
        np.testing.assert_allclose(temporal_gradient_norms(scaled, X, y).loss,
                                   temporal_gradient_norms(unfitted, X, y).loss, rtol=1e-6)


def test_the_time_aware_cell_is_refused_by_name_with_the_cells_that_work():
    # It was refused by the simplex optimizer's message: "Train this network with
    # another optimizer", which an estimator already on 'adam' cannot follow.
    from sklearn_rnn import RNNClassifier

    rng = np.random.default_rng(0)
    X = [np.column_stack([np.cumsum(rng.integers(1, 30, size=n)).astype(float), rng.normal(size=n)])
         for n in rng.integers(3, 8, size=12)]
    y = np.array([int(x[-1, 1] > 0) for x in X])
    with pytest.raises(ValueError, match=r"cell='decay' \(what cell='auto' chooses for timed input\) does "
                                         r"not read alone.*one of \['tanh', 'relu', 'gru', 'lstm'\]"):
        temporal_gradient_norms(RNNClassifier(hidden_size=4, time_feature=0, random_state=0), X, y)
    stats = temporal_gradient_norms(RNNClassifier(hidden_size=4, time_feature=0, cell="gru", random_state=0), X, y)
    assert stats.norms.shape == (7,)


def test_dropout_network_gives_deterministic_norms_and_keeps_its_mode():
    x, lengths, gen = batch()
    y = torch.randint(0, 3, (12,), generator=gen)
    net = RecurrentNetwork(3, 10, 3, num_layers=2, dropout=0.5,
                           generator=torch.Generator().manual_seed(1))
    net.train()
    first = temporal_gradient_norms(net, x, y, lengths=lengths)
    second = temporal_gradient_norms(net, x, y, lengths=lengths)
    np.testing.assert_array_equal(first.norms, second.norms)
    assert net.training
    net.eval()
    third = temporal_gradient_norms(net, x, y, lengths=lengths)
    np.testing.assert_array_equal(first.norms, third.norms)
    assert not net.training


def test_targets_and_lengths_the_default_loss_cannot_read_are_refused_by_what_they_should_be():
    # They failed inside PyTorch (IndexError, "shape '[4, 2]' is invalid", "Expected
    # target size"), or were read wrongly (float lengths truncated, lengths beside an
    # estimator ignored).
    from sklearn_rnn import RNNClassifier

    net = RecurrentNetwork(3, 4, 2, generator=torch.Generator().manual_seed(0))
    X = torch.randn(4, 5, 3, generator=torch.Generator().manual_seed(1))
    cases = [
        (dict(y=torch.tensor(1)), r"one target per sequence \(4\); got shape \(\)"),
        (dict(y=torch.tensor([0, 1, 5, 1])), r"class indices from 0 to 5, but the network has 2 outputs"),
        (dict(y=torch.tensor([0.0, 1.0, 0.0, 1.0])), r"floats, read as values: expected shape \(4, 2\)"),
        (dict(y=torch.zeros(4, 3)), r"expected shape \(4, 2\).*got \(4, 3\)"),
        (dict(y=torch.tensor([0, 1, 0, 1]), every_step=True), r"expected shape \(4, 5\), one class a step"),
        (dict(y=torch.tensor([0, 1, 0, 1]), lengths=[5, 4.5, 3, 2]), r"lengths must hold integers"),
    ]
    for kwargs, message in cases:
        with pytest.raises(ValueError, match=message):
            temporal_gradient_norms(net, X, **kwargs)
    assert temporal_gradient_norms(net, X, torch.tensor([0, 1, 0, 1]), lengths=[5, 4, 3, 2]).norms.shape == (5,)
    sequences = [np.random.default_rng(i).normal(size=(5, 3)) for i in range(6)]
    model = RNNClassifier(hidden_size=4, readout="last", conv_kernels=None, random_state=0)
    with pytest.raises(ValueError, match="lengths is for a network's padded batch"):
        temporal_gradient_norms(model, sequences, [0, 1] * 3, lengths=[5] * 6)
    with pytest.raises(ValueError, match="every_step=True puts the loss at every step, but RNNClassifier"):
        temporal_gradient_norms(model, sequences, [0, 1] * 3, every_step=True)


def test_class_indices_of_any_integer_or_bool_dtype_give_the_int64_result():
    # int32 (numpy 1.x's default integer on Windows) and bool failed inside PyTorch:
    # "expected target dtype to be Long or Byte, but got Int".
    net = RecurrentNetwork(2, 4, 3, generator=torch.Generator().manual_seed(0))
    X = np.random.default_rng(0).normal(size=(5, 4, 2))
    y = np.array([0, 1, 2, 1, 0])
    expected = temporal_gradient_norms(net, X, y).loss
    for targets in (y.astype(np.int32), torch.as_tensor(y, dtype=torch.int32)):
        assert temporal_gradient_norms(net, X, targets).loss == pytest.approx(expected, rel=1e-12)
    two = RecurrentNetwork(2, 4, 2, generator=torch.Generator().manual_seed(0))
    flags = np.array([True, False, True, True, False])
    assert temporal_gradient_norms(two, X, flags).loss == pytest.approx(
        temporal_gradient_norms(two, X, flags.astype(np.int64)).loss, rel=1e-12)


def test_every_step_padded_targets_may_hold_nan_or_ignore_index():
    # NaN-padded values gave NaN for the loss and every norm (NaN * 0 is NaN), and
    # class indices padded with -100 were refused by the LabelEncoder message.
    x, lengths, gen = batch()
    padded = torch.arange(9)[None, :] >= lengths[:, None]
    values = torch.randn(12, 9, 3, generator=gen)
    classes = torch.randint(0, 3, (12, 9), generator=gen)
    net = network()
    for y, padding in ((values, float("nan")), (classes, -100)):
        clean = temporal_gradient_norms(net, x, y, lengths=lengths, every_step=True)
        marked = temporal_gradient_norms(net, x, y.masked_fill(padded[..., None] if y.ndim == 3 else padded,
                                                                padding), lengths=lengths, every_step=True)
        assert np.isfinite(marked.loss) and np.isfinite(marked.norms).all()
        assert marked.loss == pytest.approx(clean.loss, rel=1e-6)
        np.testing.assert_allclose(marked.norms, clean.norms, rtol=1e-6)
        assert marked.gradient_norm == pytest.approx(clean.gradient_norm, rel=1e-6)
    bad = classes.masked_fill(~padded, 0)
    bad[0, 0] = -100  # a valid step: refused, and named as such
    with pytest.raises(ValueError, match=r"class indices from -100 to 0 at the valid steps"):
        temporal_gradient_norms(net, x, bad, lengths=lengths, every_step=True)


def test_an_unknown_label_is_refused_in_words_for_the_measurement():
    # The message was written for a continued fit alone: it blamed partial_fit and
    # warm_start, which a measurement on new targets neither uses nor can use.
    import warnings

    from sklearn.exceptions import ConvergenceWarning

    from sklearn_rnn import RNNClassifier

    rng = np.random.default_rng(0)
    X = [rng.normal(size=(int(n), 2)) for n in rng.integers(3, 9, size=20)]
    y = np.where([x[:, 0].sum() > 0 for x in X], "pos", "neg")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        clf = RNNClassifier(hidden_size=4, max_iter=2, readout="last", conv_kernels=None, random_state=0).fit(X, y)
    with pytest.raises(ValueError, match=r"labels \['Pos'\] that are not among the fitted classes_ = "
                                         r"\['neg', 'pos'\]: the model reads only the labels it was fitted "
                                         r"on\. Pass targets among them") as refused:
        temporal_gradient_norms(clf, X, np.where(y == "pos", "Pos", y))
    assert "continued fit" not in str(refused.value)


def test_plot_labels_any_key_and_mixed_alignments_and_reads_any_shape_of_axes():
    # A key 0 lost its label (and alone, the legend); results at every step beside
    # last-step ones got the last-step x label; a list raised AttributeError on
    # .values(); a (2, 1) array of axes passed the count and failed on .plot.
    x, lengths, gen = batch()
    y = torch.randint(0, 3, (12,), generator=gen)
    last = temporal_gradient_norms(network(), x, y, lengths=lengths)
    every = temporal_gradient_norms(network(), x, torch.randint(0, 3, (12, 9), generator=gen),
                                    lengths=lengths, every_step=True)
    ax = plot_temporal_gradient_norms({0: last, 300: last})
    assert [text.get_text() for text in ax.get_legend().get_texts()] == ["0", "300"]
    assert [text.get_text() for text in plot_temporal_gradient_norms({0: last}).get_legend().get_texts()] == ["0"]
    assert plot_temporal_gradient_norms({"last": last}).get_xlabel() == "step (the loss is at the last)"
    assert plot_temporal_gradient_norms({"last": last, "every step": every}).get_xlabel() == "step"
    assert plot_temporal_gradient_norms({"every step": every, "last": last}).get_xlabel() == "step"
    with pytest.raises(TypeError, match=r"mapping of labels to them .*got a list\. Give each result a "
                                        r"label: \{label: result, \.\.\.\}, or dict\(enumerate\(results\)\)"):
        plot_temporal_gradient_norms([last, every])
    _, column = plt.subplots(2, 1, squeeze=False)
    returned = plot_temporal_gradient_norms(last, cosines=True, ax=column)
    assert returned[0] is column[0, 0] and returned[1] is column[1, 0]
    np.testing.assert_allclose(column[1, 0].get_lines()[0].get_ydata(), last.cosines)
    with pytest.raises(ValueError, match="ax must hold 2 Axes"):
        plot_temporal_gradient_norms(last, cosines=True, ax=plt.subplots(2, 2)[1])
    plt.close("all")


def test_an_empty_batch_is_refused_by_what_it_lacks():
    # No sequence raised IndexError ("index 0 is out of bounds for dimension 1").
    net = network()
    with pytest.raises(ValueError, match=r"X holds no sequence: got shape \(0, 9, 3\)\. .*at least one sequence"):
        temporal_gradient_norms(net, torch.zeros(0, 9, 3), torch.zeros(0, dtype=torch.long))
    with pytest.raises(ValueError, match=r"X holds no step: got shape \(2, 0, 3\)"):
        temporal_gradient_norms(net, torch.zeros(2, 0, 3), torch.tensor([0, 1]))


def test_the_guides_diagnostic_batches_have_the_one_length_they_state():
    # The pages said "100 sequences of 100 to 109 steps": the generators draw one
    # length a call unless variable_length=True, so every sequence had the same one.
    import json
    import re
    from pathlib import Path

    from sklearn_rnn.datasets import make_temporal_order

    root = Path(__file__).resolve().parents[1]
    method = (root / "docs" / "user_guide" / "method.rst").read_text()
    stated = re.search(r"# 100 sequences of one length, drawn between 100 and 109 \((\d+) here", method)
    assert stated and "make_temporal_order(100, 100, random_state=0)" in method[stated.end():]
    X, _ = make_temporal_order(100, 100, random_state=0)
    assert {len(x) for x in X} == {int(stated.group(1))}
    experiments = (root / "docs" / "user_guide" / "experiments.rst").read_text()
    stated = re.search(r"100 sequences of one length,\s+drawn between 100 and 109 \((\d+) for seed 1\)",
                       experiments)
    assert stated and "100 to 109" not in experiments + method
    snapshots = json.loads((root / "experiments" / "results" / "figures_3.json").read_text())["snapshots"]
    assert {len(s["steps"]) for s in snapshots} == {int(stated.group(1))}
    assert {c for s in snapshots for c in s["counts"]} == {100}  # every sequence at every step


# ----------------------------------------------------------------- diag42
def _fitted_classifier(**params):
    import warnings

    from sklearn.exceptions import ConvergenceWarning

    from sklearn_rnn import RNNClassifier

    rng = np.random.default_rng(0)
    X = [rng.normal(size=(int(rng.integers(2, 12)), 2)) for _ in range(30)]
    y = np.array([int(x[:, 0].sum() > 0) for x in X])
    settings = dict(hidden_size=4, max_iter=2, random_state=0, readout="last", conv_kernels=None, cell="tanh")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return RNNClassifier(**{**settings, **params}).fit(X, y), X, y


def test_the_norms_leave_a_shared_module_s_mode_alone_and_run_without_dropout():
    # The caller's module was switched to eval and back: threads interleaving left it in
    # eval mode (8 of 10 trials) and ran other calls with dropout on (4 of 20).
    from concurrent.futures import ThreadPoolExecutor

    model, X, y = _fitted_classifier(dropout=0.5, num_layers=2, hidden_size=8)
    model.module_.train(True)
    reference = temporal_gradient_norms(model, X, y).norms
    assert model.module_.training  # left as it was
    with ThreadPoolExecutor(2) as pool:
        results = list(pool.map(lambda _: temporal_gradient_norms(model, X, y).norms, range(6)))
    assert model.module_.training
    for result in results:
        np.testing.assert_array_equal(result, reference)


def test_a_fitted_estimator_refuses_inputs_beyond_float32_as_fit_does():
    # The fitted path encoded them without the check: NaN gradient_norm and norms, no word.
    model, X, y = _fitted_classifier()
    spoiled = [x.copy() for x in X]
    spoiled[0][1, 0] = 1e39
    with pytest.raises(ValueError, match=r"sequence 0 of X, step 1, holds a value beyond float32's range"):
        temporal_gradient_norms(model, spoiled, y)


def test_a_fitted_estimator_is_judged_by_its_network_not_by_settings_changed_since():
    model, X, y = _fitted_classifier()
    expected = temporal_gradient_norms(model, X, y).norms
    model.set_params(bidirectional=True, cell="decay")  # e.g. before a refit: the network is as fitted
    np.testing.assert_array_equal(temporal_gradient_norms(model, X, y).norms, expected)
    bidirectional, _, _ = _fitted_classifier(bidirectional=True)
    with pytest.raises(ValueError, match=r"this RNNClassifier \(its fitted network\) has bidirectional=True"):
        temporal_gradient_norms(bidirectional, X, y)


def test_a_network_given_sequences_or_a_search_says_what_to_pass():
    from sklearn.model_selection import GridSearchCV

    net = RecurrentNetwork(2, 4, 2, generator=torch.Generator().manual_seed(0))
    sequences = [torch.randn(n, 2) for n in (3, 5, 2)]
    y = torch.tensor([0, 1, 0])
    for X, kind in ((sequences, "a list of 3 sequences"), (torch.nested.nested_tensor(sequences), "a nested tensor"),
                    (torch.nested.nested_tensor(sequences, layout=torch.jagged), "a nested tensor")):
        with pytest.raises(ValueError, match=rf"with a network, X must be one right-padded batch .*got {kind}\. "
                                             r"Pad them, e\.g\. torch\.nn\.utils\.rnn\.pad_sequence"):
            temporal_gradient_norms(net, X, y)
    model, X, y = _fitted_classifier()
    search = GridSearchCV(model, {"hidden_size": [4]}, cv=2).fit(X, y)
    with pytest.raises(TypeError, match=r"For a fitted search, pass its refitted model: search\.best_estimator_"):
        temporal_gradient_norms(search, X, y)


def test_the_plots_refuse_an_ax_that_is_not_one_axes():
    from sklearn_rnn.plotting import plot_training_history

    model, X, y = _fitted_classifier()
    figure, axes = plt.subplots(1, 2)
    try:
        for ax, fix in ((axes, r"ax=axs\[0\]"), ([axes[0]], r"ax=axs\[0\]"), (figure, r"ax=fig\.gca\(\)")):
            with pytest.raises(TypeError, match=rf"^plot_training_history: ax must be one matplotlib Axes; got "
                                                rf"\w+: pass .*{fix}"):
                plot_training_history(model, ax=ax)
        with pytest.raises(TypeError, match=r"^plot_temporal_gradient_norms: ax must be one matplotlib Axes; got Figure"):
            plot_temporal_gradient_norms(temporal_gradient_norms(model, X, y), ax=figure)
    finally:
        plt.close(figure)


def test_nan_at_a_valid_step_is_refused_and_padding_may_hold_it():
    # diag44: a NaN in X or in the targets at a valid step made the loss and every norm
    # NaN, without a word.
    net = RecurrentNetwork(2, 4, 2, generator=torch.Generator().manual_seed(0))
    X = torch.randn(3, 5, 2)
    X[1, 1, 0] = float("nan")
    with pytest.raises(ValueError, match=r"X is not finite \(NaN or infinite\) at valid step 1 of sequence 1"):
        temporal_gradient_norms(net, X, [0, 1, 1])
    padded = torch.randn(3, 5, 2)
    padded[2, 3:] = float("nan")
    assert np.isfinite(temporal_gradient_norms(net, padded, [0, 1, 1], lengths=[5, 5, 3]).norms).all()
    regressor = RecurrentNetwork(2, 4, 1, generator=torch.Generator().manual_seed(0))
    with pytest.raises(ValueError, match=r"y is not finite \(NaN or infinite\) at sequence 1"):
        temporal_gradient_norms(regressor, torch.randn(3, 5, 2), torch.tensor([1.0, float("nan"), 0.0]))


def test_the_gradient_diagnostics_run_under_a_callers_inference_mode_and_autocast():
    # diag44: inference_mode failed with PyTorch's "Inference tensors cannot be saved for
    # backward"; under a caller's bfloat16 autocast the loss and norms drifted in the 4th digit.
    net = RecurrentNetwork(2, 4, 2, generator=torch.Generator().manual_seed(0))
    X, y = torch.randn(3, 5, 2, generator=torch.Generator().manual_seed(1)), torch.tensor([0, 1, 1])
    plain = temporal_gradient_norms(net, X, y)
    with torch.inference_mode():
        inside = temporal_gradient_norms(net, X.clone(), y.clone())
    with torch.autocast("cpu", dtype=torch.bfloat16):
        cast = temporal_gradient_norms(net, X, y)
    for other in (inside, cast):
        assert other.loss == plain.loss
        np.testing.assert_array_equal(other.norms, plain.norms)


def test_plot_axes_are_all_checked_before_drawing_and_unequal_lengths_line_up_on_the_loss():
    # diag44: a (fig, ax) tuple, a list of Figures or [ax, None] met a bare AttributeError
    # (the last after drawing on ax); results of 10 and 30 steps aligned on the loss put
    # their loss steps at x = 10 and x = 30.
    net = RecurrentNetwork(2, 4, 2, generator=torch.Generator().manual_seed(0))
    g = torch.Generator().manual_seed(1)
    short = temporal_gradient_norms(net, torch.randn(4, 10, 2, generator=g), torch.tensor([0, 1, 1, 0]))
    long_ = temporal_gradient_norms(net, torch.randn(4, 30, 2, generator=g), torch.tensor([0, 1, 1, 0]))
    fig, top = plt.subplots()
    with pytest.raises(TypeError, match=r"got tuple: unpack what plt.subplots\(\) returns"):
        plot_temporal_gradient_norms(short, ax=plt.subplots())
    with pytest.raises(TypeError, match=r"got NoneType"):
        plot_temporal_gradient_norms(short, cosines=True, ax=[top, None])
    assert not top.lines  # nothing drawn before the refusal
    ax = plot_temporal_gradient_norms({"T=10": short, "T=30": long_}, ax=top)
    assert [line.get_xdata()[-1] for line in ax.get_lines()] == [30, 30]
    assert [line.get_xdata()[0] for line in ax.get_lines()] == [21, 1]
    plt.close("all")


def test_reversed_labels_overflowing_networks_and_hooks_on_the_diagnostics_path():
    # diag45 1, 2, 4: int64 labels as a reversed view (y[::-1]) crashed fit and the
    # diagnostics (torch refuses negative strides); an overflowing relu network gave
    # all-NaN norms without a word; a network in training mode was deep-copied with its
    # hooks, so a recorder's object was copied and recorded nothing.
    import warnings

    from sklearn.exceptions import ConvergenceWarning

    from sklearn_rnn import RNNClassifier
    from sklearn_rnn.diagnostics import temporal_gradient_norms
    from sklearn_rnn.nn import RecurrentNetwork

    rng = np.random.default_rng(0)
    X = [rng.normal(size=(int(rng.integers(2, 12)), 2)) for _ in range(40)]
    y = np.array([int(x[:, 0].sum() > 0) for x in X])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model = RNNClassifier(hidden_size=4, max_iter=1, random_state=0, readout="last", conv_kernels=None)
        model.fit(X[::-1], y[::-1])
    assert np.isfinite(temporal_gradient_norms(model, X[::-1], y[::-1]).norms).all()
    X_long = torch.randn(3, 200, 2, generator=torch.Generator().manual_seed(1))
    net = RecurrentNetwork(2, 8, 2, cell="relu", spectral_radius=5.0, generator=torch.Generator().manual_seed(0))
    with pytest.raises(ValueError, match=r"the loss of this batch is not finite .*'relu' cell's state is unbounded"):
        temporal_gradient_norms(net, X_long, torch.tensor([0, 1, 1]))

    class Recorder:
        def __init__(self):
            self.calls = 0

        def __call__(self, module, args, output):
            self.calls += 1

    recorder = Recorder()
    net = RecurrentNetwork(2, 8, 2, generator=torch.Generator().manual_seed(0)).train()
    net.readout.register_forward_hook(recorder)
    temporal_gradient_norms(net, X_long[:, :20], torch.tensor([0, 1, 1]))
    assert recorder.calls == 1
