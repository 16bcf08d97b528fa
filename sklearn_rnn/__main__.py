"""The package's main job: ``python -m sklearn_rnn``.

A short demonstration on data the package ships: predict death in the Mayo Clinic PBC
sequential study from each patient's history of visits, with an RNN classifier, scored
by 8-fold cross-validated ROC AUC against logistic regression on the last visit.
"""

from __future__ import annotations

import argparse
import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.impute import SimpleImputer
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import StratifiedKFold, cross_val_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from sklearn_rnn import RNNClassifier, SequenceStandardScaler
from sklearn_rnn.clinical import build_cohort
from sklearn_rnn.datasets import load_pbcseq

FEATURES = ["age", "bili", "albumin", "protime", "ast", "platelet", "edema", "ascites", "hepato", "spiders"]
YEAR = 365.25


def main(argv: list[str] | None = None) -> None:
    """Run the demonstration and print its results.

    Parameters
    ----------
    argv : list of str, optional
        Command-line arguments; ``--folds`` and ``--max-iter`` shorten the run.
    """
    parser = argparse.ArgumentParser(prog="python -m sklearn_rnn", description=__doc__)
    parser.add_argument("--folds", type=int, default=8)
    parser.add_argument("--max-iter", type=int, default=60)
    args = parser.parse_args(argv)

    table = load_pbcseq()
    table = table[~table["id"].isin(table.loc[table["status"] == 1, "id"])]  # transplants out
    deaths = table.loc[table["status"] == 2].groupby("id")["futime"].first()
    cohort = build_cohort(
        table,
        id_column="id",
        time_column="day",
        feature_columns=FEATURES,
        event_time=deaths,
        end_time=table.groupby("id")["futime"].first(),
        upper_span=YEAR,
        lower_span=YEAR,
        min_visits=2,
        positive_cut="upper_span",
    )
    X = [sequence[:, 1:] for sequence in cohort.sequences]  # drop the time column
    y = cohort.y
    print(f"PBC cohort: {len(y)} patients, {int(y.sum())} deaths, visits per patient "
          f"{min(map(len, X))}-{max(map(len, X))}")

    cv = StratifiedKFold(args.folds, shuffle=True, random_state=0)
    rnn = make_pipeline(
        SequenceStandardScaler(),
        RNNClassifier(hidden_size=20, max_iter=args.max_iter, random_state=0),
    )
    last_visit = np.array([x[-1] for x in X])
    logistic = make_pipeline(SimpleImputer(), StandardScaler(), LogisticRegression(max_iter=1000))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        rnn_auc = cross_val_score(rnn, X, y, scoring="roc_auc", cv=cv)
    logistic_auc = cross_val_score(logistic, last_visit, y, scoring="roc_auc", cv=cv)
    print(f"ROC AUC, mean of {args.folds} folds: RNN on the visit history {rnn_auc.mean():.3f}, "
          f"logistic regression on the last visit {logistic_auc.mean():.3f}")


if __name__ == "__main__":
    main()
