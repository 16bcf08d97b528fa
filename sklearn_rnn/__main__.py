"""The package's main job: ``python -m sklearn_rnn`` runs the PBC visit-history study.

The lupus study of the thesis (section 4.3) redone on the public Mayo Clinic PBC data
shipped with the package: predict death at least a year ahead from a patient's history
of visits at irregular days, scored by the pooled 8-fold cross-validated ROC AUC, against
logistic regressions on the first visit, the last visit and a summary of the history,
and with and without the time between visits (see
:class:`sklearn_rnn.clinical.PBCStudy`). By default the headline cohort and the nested
search (a few minutes on 2 cores); ``--full`` adds the grid of cohorts of the thesis'
Table 4.4 (under 15 minutes on 2 cores).
"""

from __future__ import annotations

import argparse
import time
import warnings
from typing import Any

from sklearn.exceptions import ConvergenceWarning

from sklearn_rnn.clinical import PBCStudy


def main(argv: list[str] | None = None) -> None:
    """Run the study and print its tables.

    Parameters
    ----------
    argv : list of str, optional
        Command-line arguments (see ``python -m sklearn_rnn --help``).
    """
    parser = argparse.ArgumentParser(prog="python -m sklearn_rnn", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--full", action="store_true",
                        help="also score every cohort of the grid upper x lower span x min visits")
    parser.add_argument("--repeats", type=int, default=3,
                        help="shuffles of the 8-fold split on the headline cohort (default 3)")
    parser.add_argument("--n-jobs", type=int, default=-1,
                        help="folds fitted in parallel (default -1: every core)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the folds and the RNNs")
    parser.add_argument("--plot", metavar="FILE",
                        help="save the ROC, sensitivity-specificity and precision-recall "
                             "curves of the nested search to FILE (e.g. pbc.png)")
    args = parser.parse_args(argv)

    settings = dict(n_repeats=args.repeats, n_jobs=args.n_jobs, random_state=args.seed)
    study = PBCStudy(**settings) if args.full else PBCStudy.quick(**settings)
    print(__doc__.split("\n\n")[1].replace("\n", " "), "\n", flush=True)
    start = time.perf_counter()

    def progress(part: str, row: dict[str, Any]) -> None:
        setting = f"upper {row['upper_span']:g} y, lower {row['lower_span']:g} y, " \
                  f"min visits {row['min_visits']}"
        print(f"  [{time.perf_counter() - start:5.0f} s] {part}: {setting} done", flush=True)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        result = study.run(on_row=progress)

    print(f"\nPooled {study.n_splits}-fold ROC AUC, mean of {study.n_repeats} shuffles, "
          f"on the headline cohort (death within follow-up, predicted >= "
          f"{study.main_setting[0]:g} year ahead; transplanted patients left out):\n")
    print(result.to_string("main"))
    if len(result.grid):
        print(f"\nThe grid (spans in years; {study.grid_repeats} shuffle per cohort):\n")
        print(result.to_string("grid"))
    upper, lower, visits = result.best_setting
    nested = result.nested.summary()
    print(f"\nNested grid search of the RNN with time gaps over {study.search_grid} "
          f"(inner 3-fold) on upper {upper:g} y, lower {lower:g} y, min visits {visits}: "
          f"pooled AUC {nested['pooled_auc']:.3f}, mean fold AUC {nested['mean_fold_auc']:.3f}; "
          f"at threshold {nested['threshold']:g}: precision {nested['precision']:.2f}, "
          f"recall {nested['recall']:.2f}, specificity {nested['specificity']:.2f}")
    if args.plot:
        import matplotlib

        matplotlib.use("Agg")
        axes = result.plot()
        axes[0].figure.savefig(args.plot, dpi=100, bbox_inches="tight")
        print(f"Curves saved to {args.plot}")
    print(f"\nDone in {result.seconds:.0f} s.")


if __name__ == "__main__":
    main()
