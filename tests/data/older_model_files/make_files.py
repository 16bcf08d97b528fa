"""Write a classifier and a regressor model file, and their predictions, with the
sklearn_rnn version on the path (see README.md)."""

import sys
import warnings

import numpy as np


def main(prefix: str) -> None:
    import sklearn_rnn
    from sklearn_rnn import RNNClassifier, RNNRegressor

    warnings.simplefilter("ignore")
    rng = np.random.default_rng(0)
    X = [rng.normal(size=(int(rng.integers(2, 6)), 2)) for _ in range(12)]
    RNNClassifier(hidden_size=4, max_iter=2, random_state=0).fit(X, np.arange(12) % 2).save(
        prefix + "_classifier.safetensors")
    RNNRegressor(hidden_size=4, max_iter=2, random_state=0).fit(X, np.linspace(-1, 1, 12)).save(
        prefix + "_regressor.safetensors")
    classifier = sklearn_rnn.load(prefix + "_classifier.safetensors")
    regressor = sklearn_rnn.load(prefix + "_regressor.safetensors")
    np.savez(prefix + "_predictions.npz", proba=classifier.predict_proba(X), regression=regressor.predict(X))


if __name__ == "__main__":
    main(sys.argv[1])
