"""optimizer='simplex' in the estimators."""

import numpy as np
import pytest
import torch

from sklearn_rnn import RNNClassifier, RNNRegressor
from sklearn_rnn.datasets import make_addition, make_temporal_order, task_error

from _helpers import convergence_warning_allowed


def test_switching_at_zero_is_clipped_sgd():
    X, y = make_addition(300, 12, random_state=0)
    kwargs = dict(hidden_size=10, cell="tanh", early_stopping=False, learning_rate=0.05,
                  max_iter=4, batch_size=50, readout="last", conv_kernels=None, random_state=0)
    # On a GPU (device='auto') 'sgd' trains with cuDNN's fused recurrence, whose products
    # PyTorch lets use TF32 by default, and 'simplex' with float32 products: compare float32
    # with float32 (with TF32, an H100 parted the predictions by up to 1.9e-4).
    with torch.backends.cudnn.flags(enabled=True, allow_tf32=False):
        with convergence_warning_allowed():
            sgd = RNNRegressor(optimizer="sgd", **kwargs).fit(X, y)
        with convergence_warning_allowed():
            switched = RNNRegressor(optimizer="simplex", switch_threshold=0.0, **kwargs).fit(X, y)
        predicted = switched.predict(X), sgd.predict(X)
    assert switched.net_.optimizer_.branch_counts["switched"] == 4 * 6
    # Same steps; the full gradient is summed from per-step parts in another order.
    np.testing.assert_allclose(*predicted, rtol=1e-5)


def test_simplex_direction_differs_from_the_gradient_and_is_seeded():
    X, y = make_addition(200, 12, random_state=0)
    kwargs = dict(hidden_size=10, optimizer="simplex", max_iter=3, batch_size=50, random_state=0)
    with convergence_warning_allowed():
        a = RNNRegressor(**kwargs).fit(X, y)
    with convergence_warning_allowed():
        b = RNNRegressor(**kwargs).fit(X, y)
    with convergence_warning_allowed():
        sgd = RNNRegressor(**{**kwargs, "optimizer": "sgd"}).fit(X, y)
    counts = a.net_.optimizer_.branch_counts
    assert counts["simplex"] + counts["descent_fallback"] == 12 and counts["simplex"] > 0
    np.testing.assert_array_equal(a.predict(X), b.predict(X))
    assert not np.allclose(a.predict(X), sgd.predict(X))


def test_simplex_solves_temporal_order_at_small_size():
    # The thesis settings (50 tanh units, rho 1.2, tau 1, psi 0.9) at length 10.
    X, y = make_temporal_order(2000, 10, random_state=0)
    X_valid, y_valid = make_temporal_order(2000, 10, random_state=1)
    clf = RNNClassifier(
        optimizer="simplex", learning_rate=0.05, switch_threshold=0.9, batch_size=100,
        max_iter=20, tol=0.0, random_state=0,
    )
    with convergence_warning_allowed():
        clf.fit(X, y)  # 400 updates
    assert task_error("temporal_order", y_valid, clf.predict_proba(X_valid)) < 0.01
    assert clf.net_.optimizer_.branch_counts["simplex"] > 100


@pytest.mark.parametrize("optimizer, expected", [("adam", 0.01), ("sgd", 0.05), ("simplex", 0.05)])
def test_learning_rate_auto_depends_on_the_optimizer(optimizer, expected):
    X, y = make_temporal_order(40, 6, random_state=0)
    clf = RNNClassifier(hidden_size=4, optimizer=optimizer, max_iter=1, random_state=0)
    assert clf.learning_rate == "auto"
    with convergence_warning_allowed():
        clf.fit(X, y)
    assert clf.net_.optimizer_.param_groups[0]["lr"] == expected
    explicit = RNNClassifier(hidden_size=4, optimizer=optimizer, learning_rate=0.2, max_iter=1)
    with convergence_warning_allowed():
        explicit.fit(X, y)
    assert explicit.net_.optimizer_.param_groups[0]["lr"] == 0.2


def test_learning_rate_rejects_other_strings():
    X, y = make_temporal_order(20, 6, random_state=0)
    with pytest.raises(ValueError, match="learning_rate"):
        RNNClassifier(learning_rate="fast").fit(X, y)
