"""The package's main job: ``python -m sklearn_rnn`` runs the PBC visit-history study.

The lupus study of the thesis (section 4.3 of Giulio Galvan, *On recurrent neural
networks*, 2015) redone on the public Mayo Clinic PBC data shipped with the package:
predict death at least a year ahead from a patient's history of visits at irregular
days, scored by the pooled 8-fold cross-validated ROC AUC with 95% bootstrap intervals,
against logistic regressions on the first visit, the last visit and a summary of the
history, and with and without the time between visits (see
:class:`sklearn_rnn.clinical.PBCStudy`). By default the headline cohort and the nested
search (40 s to 2 minutes on 2 cores, by the machine); ``--full`` adds the grid of cohorts of the thesis'
Table 4.4 (under 15 minutes on 2 cores).
"""

from __future__ import annotations

import argparse
import csv
import errno
import io
import os
import re
import stat
import tempfile
import textwrap
import time
import warnings
from typing import Any

from sklearn.exceptions import ConvergenceWarning

from sklearn_rnn.clinical import PBCStudy
from sklearn_rnn.clinical._pbc_study import THESIS

INTRO = f"""\
The PBC study: can a recurrent network read a patient's visit history?

Data: the Mayo Clinic trial of primary biliary cholangitis (pbcseq, 312 patients, 1,945
visits at irregular days), shipped with the package. Task: from the visits up to a year
before the end of follow-up, predict whether the patient died (patients who had a liver
transplant are left out). This redoes the lupus study of section 4.3 of
{textwrap.fill(THESIS, 86, initial_indent="  ", subsequent_indent="  ")}
on public data. Every patient is predicted once by a model that did not see it (8
stratified folds); the 8 folds' predictions are pooled into one ROC AUC (0.5 is chance,
1 is perfect), averaged over shuffles of the folds.
"""

COLUMNS = """\
Columns: upper = prediction horizon (years before death or end of follow-up), lower =
years the kept visits must cover, visits = minimum visits per patient, pos / neg =
patients who died / did not. Then the pooled AUC of each model:
  LR first, LR last       logistic regression on the first / the last visit's values
  LR summary              logistic regression on a summary of all visits (last value,
                          mean and slope per day of each measurement, number of visits,
                          days from first to last visit)
  LR summary, C tuned     the same with its regularization chosen by an inner search
  RNN no time             the recurrent network reading the visits in order, no dates
  RNN visit order         the time-aware network given the visit number 0, 1, 2... as
                          its clock: order, but no real gaps
  RNN time gaps           the time-aware network given the real days between visits
"""

INTERVALS = """\
95% intervals: patients resampled 2,000 times with replacement (positives and negatives
separately); every model rescored on the same resamples. The difference to the best
logistic regression is paired (same resampled patients); an interval containing 0 means
this cohort cannot tell the two models apart.
"""


def main(argv: list[str] | None = None) -> None:
    """Run the study and print its tables.

    Parameters
    ----------
    argv : list of str, optional
        Command-line arguments (see ``python -m sklearn_rnn --help``).
    """
    # The help shows the docstring as plain text, without reStructuredText markup.
    description = re.sub(r":[a-z]+:`~?([^`]+)`", r"\1", __doc__).replace("``", "")
    parser = argparse.ArgumentParser(prog="python -m sklearn_rnn", description=description,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--full", action="store_true",
                        help="also score every cohort of the grid upper x lower span x min visits")
    parser.add_argument("--repeats", type=_at_least(1), default=3,
                        help="shuffles of the 8-fold split on the headline cohort (default 3)")
    parser.add_argument("--n-jobs", type=_n_jobs, default=-1,
                        help="folds fitted in parallel (default -1: every core)")
    parser.add_argument("--seed", type=_at_least(0, 2**32 - 1), default=0,  # numpy's seeds
                        help="seed of the folds and the RNNs")
    parser.add_argument("--plot", metavar="FILE",
                        help="save the ROC, sensitivity-specificity and precision-recall "
                             "curves of the nested search to FILE (e.g. pbc.png)")
    parser.add_argument("--save-intervals", metavar="FILE",
                        help="write the headline cohort's AUCs and intervals to FILE (CSV)")
    args = parser.parse_args(argv)
    _check_output_paths(parser, args)

    settings = dict(n_repeats=args.repeats, n_jobs=args.n_jobs, random_state=args.seed)
    study = PBCStudy(**settings) if args.full else PBCStudy.quick(**settings)
    print(INTRO, flush=True)
    start = time.perf_counter()

    def clock() -> str:
        return f"[{time.perf_counter() - start:5.0f} s]"

    rows_done = {"main": 0, "grid": 0}

    def progress(part: str, row: dict[str, Any]) -> None:
        rows_done[part] += 1
        setting = f"upper {row['upper_span']:g} y, lower {row['lower_span']:g} y, " \
                  f"min visits {row['min_visits']}"
        print(f"  {clock()} {part}: {setting} done (7 models)", flush=True)
        if rows_done["grid"] == len(study.grid) and (part == "grid" or not study.grid):
            n_fits = study.n_splits * (_candidates(study.search_grid) * 3 + 1)
            print(f"  {clock()} nested search of 'RNN time gaps' next: {study.n_splits} outer "
                  f"folds, each a 3-fold search over {_candidates(study.search_grid)} "
                  f"settings ({n_fits} fits)", flush=True)

    def model_done(part: str, name: str) -> None:
        if part == "main":
            print(f"  {clock()} {name} scored", flush=True)

    def fold_done(done: int, total: int) -> None:
        print(f"  {clock()} nested search: outer fold {done} of {total} done", flush=True)

    print(f"  {clock()} scoring 7 models over {study.n_repeats} shuffles of 8 folds "
          f"on the headline cohort...", flush=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        result = study.run(on_row=progress, on_fold=fold_done, on_model=model_done)

    print(f"\nHeadline cohort (death predicted >= {study.main_setting[0]:g} year ahead), pooled "
          f"{study.n_splits}-fold ROC AUC, mean of {study.n_repeats} shuffles:\n")
    print(result.to_string("main"))
    print("\n" + COLUMNS)
    print(result.interval_table())
    print("\n" + INTERVALS)
    gain, low, high = result.time_gaps_over_visit_order
    print(textwrap.fill(
        f"What the real gaps add over the visit order: 'RNN time gaps' minus 'RNN visit "
        f"order' = {gain:+.3f} AUC [95% CI {low:+.3f}, {high:+.3f}], paired as above.", 88))
    if len(result.grid):
        print(f"\nThe grid (spans in years; {study.grid_repeats} shuffle per cohort):\n")
        print(result.to_string("grid"))
    upper, lower, visits = result.best_setting
    nested = result.nested.summary()
    print("\n" + textwrap.fill(
        f"Nested search of 'RNN time gaps' (parameters chosen inside each training fold "
        f"by a 3-fold search over {study.search_grid}) on upper {upper:g} y, lower "
        f"{lower:g} y, min visits {visits}: pooled AUC {nested['pooled_auc']:.3f}, mean AUC "
        f"within a fold {nested['mean_fold_auc']:.3f}; predicting death when the "
        f"probability is at least {nested['threshold']:g}: precision "
        f"{nested['precision']:.2f} (deaths among those predicted), recall "
        f"{nested['recall']:.2f} (deaths found), specificity {nested['specificity']:.2f} "
        "(survivors recognized).", 88))
    if args.save_intervals:
        _save_intervals(result, args.save_intervals)
        print(f"Intervals saved to {args.save_intervals}")
    if args.plot:
        _save_plot(result, args.plot)
        print(f"Curves saved to {args.plot}")
    print(f"\nDone in {result.seconds:.0f} s.")


def _save_plot(result: Any, path: str) -> None:
    """Write the study's curves to ``path`` from a figure of their own: the backend of
    a caller's process (``main`` called from a notebook) and pyplot's figures are left
    as they were."""
    from matplotlib.figure import Figure

    figure = Figure(figsize=(15, 4.5))
    result.plot(figure.subplots(1, 3))
    figure.savefig(path, dpi=100, bbox_inches="tight")


def _check_output_paths(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Refuse output files that could not be written, before the study runs (so that
    its results are not lost): a missing folder (or a file where a folder should be), a
    folder given as the file, a file that may not be written, a link into a missing
    folder, a name too long, the same file twice (by any path), or a plot format
    matplotlib does not write."""
    for option, path in (("--plot", args.plot), ("--save-intervals", args.save_intervals)):
        if path == "":
            parser.error(f"{option} was given an empty file name: give the file to write, or "
                         f"leave out {option}.")
        if path is None:
            continue
        folder = os.path.dirname(os.path.abspath(path))
        if os.path.isdir(path) or path.endswith(os.sep):
            parser.error(f"{option} {path}: expected a file name, got a folder.")
        if not os.path.isdir(folder):
            above = folder  # the nearest part of the path that exists: a file blocks it
            while not os.path.exists(above) and os.path.dirname(above) != above:
                above = os.path.dirname(above)
            if os.path.exists(above) and not os.path.isdir(above):
                parser.error(f"{option} {path}: {above} is a file, not a folder, so no file can be "
                             "written in it (checked before the study runs, so that its results "
                             "are not lost). Give a file name in an existing folder.")
            parser.error(f"{option} {path}: the folder {folder} does not exist (checked before "
                         "the study runs, so that its results are not lost).")
        if not os.path.exists(path):  # an existing file is rewritten in place: its folder may be read-only
            try:  # a folder without write permission, or one that holds no files (/proc)
                with tempfile.TemporaryFile(dir=folder):
                    pass
            except OSError as error:
                parser.error(f"{option} {path}: no file can be written in {folder} ({error.strerror}; "
                             "checked before the study runs, so that its results are not lost).")
        _check_output_file(parser, option, path)
    # The same file by another path too: through a link (realpath), or a hard link (samefile).
    if args.plot and args.save_intervals and (
        os.path.realpath(args.plot) == os.path.realpath(args.save_intervals)
        or (os.path.exists(args.plot) and os.path.exists(args.save_intervals)
            and os.path.samefile(args.plot, args.save_intervals))
    ):
        parser.error(f"--plot {args.plot} and --save-intervals {args.save_intervals} name the same "
                     f"file ({os.path.realpath(args.plot)}): the figure would overwrite the intervals. "
                     "Give two file names.")
    if args.plot:
        try:
            from matplotlib.figure import Figure
        except ImportError:
            parser.error(f"--plot {args.plot}: drawing the figure needs matplotlib, which is "
                         "not installed; install it (pip install matplotlib) or leave out --plot.")

        formats = Figure().canvas.get_supported_filetypes()
        extension = os.path.splitext(args.plot)[1].lstrip(".").lower()
        if extension not in formats:
            parser.error(f"--plot {args.plot}: expected a file name ending in one of "
                         f"{sorted(formats)} (the image format).")
        probe = Figure(figsize=(1, 1))
        probe.text(0.5, 0.5, "x")
        try:  # a format listed but not written here ('pgf' needs a LaTeX install)
            probe.savefig(io.BytesIO(), format=extension, bbox_inches="tight")
        except Exception as error:  # noqa: BLE001 (matplotlib's backends raise what they like)
            parser.error(f"--plot {args.plot}: matplotlib cannot write {extension!r} files here "
                         f"({error}); choose another format, e.g. .png.")


def _check_output_file(parser: argparse.ArgumentParser, option: str, path: str) -> None:
    """Refuse an output file that its folder takes but the study could not write at its
    end: an existing file without write permission (for this user, or for anyone: a file
    marked read-only is kept, as a model's ``save`` keeps it), a link whose target cannot
    be created (a link into a missing folder), or a name the file system refuses (too
    long). A new file is tried by creating it and removing it again: nothing stays."""
    checked = "checked before the study runs, so that its results are not lost"
    if os.path.exists(path):  # through links: the file the study would write
        mode = os.stat(path).st_mode
        if stat.S_ISREG(mode) and not mode & 0o222:
            parser.error(f"{option} {path}: the file there is read-only (mode "
                         f"{stat.S_IMODE(mode):o}; {checked}). Make it writable (chmod u+w "
                         f"{path}) or give another file name.")
        if not os.access(path, os.W_OK):
            parser.error(f"{option} {path}: this user may not write the file there (mode "
                         f"{stat.S_IMODE(mode):o}; {checked}). Make it writable (chmod u+w "
                         f"{path}) or give another file name.")
        return
    target = os.path.realpath(path)  # a link to nothing: the file that writing creates
    try:
        os.close(os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
    except OSError as error:
        link = os.path.islink(path)
        fix = ("Give a shorter file name" if error.errno == errno.ENAMETOOLONG else
               "Give a file name in an existing folder you may write in"
               + (", or point the link at one" if link else ""))
        parser.error(f"{option} {path}{f' (a link to {target})' if link else ''}: the file "
                     f"cannot be created ({error.strerror}; {checked}). {fix}.")
    os.remove(target)


def _at_least(low: int, high: int | None = None) -> Any:
    """An argparse type: an int of at least ``low`` (and at most ``high``)."""

    def parse(text: str) -> int:
        value = int(text)
        if value < low or (high is not None and value > high):
            within = f">= {low}" if high is None else f"in [{low}, {high}]"
            raise argparse.ArgumentTypeError(f"expected an integer {within}; got {value}")
        return value

    parse.__name__ = "int"  # argparse's "invalid int value: 'abc'"
    return parse


def _n_jobs(text: str) -> int:
    """An argparse type: joblib's n_jobs, a positive count or a negative one (-1: every core)."""
    value = int(text)
    if value == 0:
        raise argparse.ArgumentTypeError("expected a positive count, or -1 for every core; got 0")
    return value


_n_jobs.__name__ = "int"


def _candidates(grid: dict[str, list[Any]]) -> int:
    count = 1
    for values in grid.values():
        count *= len(values)
    return count


def _save_intervals(result: Any, path: str) -> None:
    """The interval table and the gain of the gaps over the visit order, as CSV."""
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["model", "auc", "auc_low", "auc_high", "reference", "diff",
                         "diff_low", "diff_high"])
        for name, row in result.intervals.iterrows():
            writer.writerow([name, *(f"{row[c]:.6f}" for c in ("auc", "auc_low", "auc_high")),
                             result.best_baseline,
                             *(f"{row[c]:.6f}" for c in ("diff", "diff_low", "diff_high"))])
        gain, low, high = result.time_gaps_over_visit_order
        row = result.intervals.loc["RNN time gaps"]
        writer.writerow(["RNN time gaps", f"{row['auc']:.6f}", f"{row['auc_low']:.6f}",
                         f"{row['auc_high']:.6f}", "RNN visit order", f"{gain:.6f}",
                         f"{low:.6f}", f"{high:.6f}"])


if __name__ == "__main__":
    main()
