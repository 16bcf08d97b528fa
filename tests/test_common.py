"""scikit-learn's own estimator checks, with honest tags and one declared expected failure
(the estimators'; the scaler and VisitFeatures pass every check)."""

from sklearn.utils.estimator_checks import parametrize_with_checks

from sklearn_rnn import RNNClassifier, RNNRegressor, SequenceStandardScaler
from sklearn_rnn.clinical import VisitFeatures

#: Checks that cannot hold for a float32 minibatch learner, with the reason.
EXPECTED_FAILED_CHECKS = {
    "check_sample_weight_equivalence_on_dense_data": (
        "Weighting a sample by k is not the same as repeating it k times for a "
        "minibatch learner: repeated rows change the batches and the number of "
        "updates per epoch (scikit-learn declares the same for its SGD estimators)."
    ),
}


@parametrize_with_checks(
    [RNNClassifier(), RNNRegressor(), RNNClassifier(bidirectional=True), RNNRegressor(bidirectional=True),
     SequenceStandardScaler(),
     SequenceStandardScaler(per_sequence=True), VisitFeatures(), VisitFeatures("last")],
    expected_failed_checks=lambda estimator: (
        EXPECTED_FAILED_CHECKS if isinstance(estimator, (RNNClassifier, RNNRegressor)) else {}
    ),
)
def test_sklearn_compatible_estimator(estimator, check):
    check(estimator)
