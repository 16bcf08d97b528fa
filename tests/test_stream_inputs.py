"""What a streaming ``partial_fit`` checks on every call, done once per batch: labels
looked up in ``classes_`` (as ``LabelEncoder`` would encode them), values checked by one
pass over the steps."""

import numpy as np
import pytest
from sklearn.preprocessing import LabelEncoder

from sklearn_rnn import RNNClassifier
from sklearn_rnn._estimators import _class_indices


@pytest.mark.parametrize(
    "classes, y",
    [
        (np.array([0, 3, 7]), np.array([7, 0, 3, 3])),
        (np.array([0, 1, 2]), np.array([2.0, 0.0, 1.0])),  # integral floats name the classes
        (np.array([False, True]), np.array([True, False, True])),
        (np.array(["a", "b", "c"]), np.array(["c", "a", "b"], dtype=object)),
    ],
)
def test_class_indices_are_label_encoder_indices(classes, y):
    expected = LabelEncoder().fit(classes).transform(y)
    got = _class_indices(classes, y)
    assert got.dtype == expected.dtype
    np.testing.assert_array_equal(got, expected)


def test_class_indices_mark_labels_outside_classes():
    np.testing.assert_array_equal(_class_indices(np.array([1, 5]), np.array([5, 9, 0, 1])), [1, -1, -1, 0])
    np.testing.assert_array_equal(_class_indices(np.array(["a", "b"]), np.array([1, 2])), [-1, -1])


def test_partial_fit_refuses_labels_outside_classes():
    X = [np.full((3, 1), float(i)) for i in range(4)]
    clf = RNNClassifier(hidden_size=2, optimizer="sgd", random_state=0)
    clf.partial_fit(X, ["a", "b", "a", "c"], classes=["a", "b", "c"])
    clf.partial_fit(X, np.array(["c", "b", "a", "a"], dtype=object))  # e.g. a pandas column
    with pytest.raises(ValueError, match=r"labels \['d'\] that are not among the fitted classes_"):
        clf.partial_fit(X, ["a", "d", "a", "b"])
    with pytest.raises(ValueError, match=r"labels \[0, 1\] that are not among the fitted classes_"):
        clf.partial_fit(X, [0, 1, 0, 1])
    assert len(clf.loss_curve_) == 2  # the refused calls changed nothing


@pytest.mark.parametrize(
    "bad, message",
    [(np.inf, "holds an infinite value at step 1, feature 0"), (np.nan, None)],
)
def test_partial_fit_checks_values_of_every_batch(bad, message):
    X = [np.zeros((3, 1)), np.ones((2, 1))]
    clf = RNNClassifier(hidden_size=2, optimizer="sgd", random_state=0)
    clf.partial_fit(X, [0, 1], classes=[0, 1])
    X[1][1, 0] = bad
    if message is None:  # NaN: a missing value (a trailing all-NaN step is padding)
        clf.partial_fit(X, [0, 1])
        assert len(clf.loss_curve_) == 2
    else:
        with pytest.raises(ValueError, match=message):
            clf.partial_fit(X, [0, 1])


def test_stream_runs_no_validation_callback():
    X = [np.full((3, 1), float(i)) for i in range(40)]
    y = np.arange(40) % 2
    clf = RNNClassifier(hidden_size=2, optimizer="sgd", random_state=0)
    clf.partial_fit(X, y, classes=[0, 1])
    assert "valid_loss" not in dict(clf.net_.callbacks_)
    clf.set_params(early_stopping=True, max_iter=2, warm_start=False).fit(X, y)
    assert "valid_loss" in dict(clf.net_.callbacks_)
    assert len(clf.net_.history[:, "valid_loss"]) == 2
