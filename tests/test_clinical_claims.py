"""The README's and the guide's clinical sentences agree with the table they quote.

``docs/_static/pbc_intervals.csv`` is written by ``python -m sklearn_rnn
--save-intervals``; every number the README and the user guide state about the PBC
study is rebuilt here from that table and looked up in their text.
"""

import csv
import os
import re
from pathlib import Path

import numpy as np
import pytest

from sklearn_rnn.clinical import PooledCVResult, auc_intervals

ROOT = Path(__file__).resolve().parents[1]
TABLE = ROOT / "docs" / "_static" / "pbc_intervals.csv"


def rows():
    with TABLE.open(encoding="utf-8") as handle:
        return {(row["model"], row["reference"]): row for row in csv.DictReader(handle)}


def flat(path):
    return re.sub(r"\s+", " ", path.read_text(encoding="utf-8"))


def number(value, signed=False):
    return f"{float(value):+.3f}" if signed else f"{float(value):.3f}"


def claims():
    table = rows()
    best = next(ref for (model, ref) in table if model == "LR first")
    gaps = table[("RNN time gaps", best)]
    order = table[("RNN visit order", best)]
    gain = table[("RNN time gaps", "RNN visit order")]
    return {
        "gaps auc": f"{number(gaps['auc'])} (95% CI {number(gaps['auc_low'])}-{number(gaps['auc_high'])})",
        "no time": number(table[("RNN no time", best)]["auc"]),
        "baseline": number(table[(best, best)]["auc"]),
        "difference": f"{number(gaps['diff'], True)} ({number(gaps['diff_low'], True)} to "
                      f"{number(gaps['diff_high'], True)})",
        "visit order": number(order["auc"]),
        "gain": f"{number(gain['diff'], True)} ({number(gain['diff_low'], True)} to "
                f"{number(gain['diff_high'], True)})",
    }


def test_the_table_names_the_best_baseline_and_every_model():
    table = rows()
    references = {ref for (_, ref) in table}
    assert references == {"LR summary, C tuned", "RNN visit order"}
    baselines = {model: float(row["auc"]) for (model, ref), row in table.items()
                 if model.startswith("LR") and ref != "RNN visit order"}
    assert max(baselines, key=baselines.get) == "LR summary, C tuned"
    assert {model for model, _ in table} == {
        "LR first", "LR last", "LR summary", "LR summary, C tuned", "RNN no time",
        "RNN visit order", "RNN time gaps"}


@pytest.mark.parametrize("claim", sorted(claims()))
def test_readme_sentence_matches_the_table(claim):
    assert claims()[claim] in flat(ROOT / "README.md"), claim


@pytest.mark.parametrize("claim", ["gaps auc", "no time", "visit order"])
def test_irregular_time_page_matches_the_table(claim):
    assert claims()[claim] in flat(ROOT / "docs" / "user_guide" / "irregular_time.rst")


def test_clinical_page_table_matches_the_csv():
    text = flat(ROOT / "docs" / "user_guide" / "clinical.rst")
    for (model, reference), row in rows().items():
        if reference == "RNN visit order":
            continue
        line = f"{model} {number(row['auc'])} [{number(row['auc_low'])}, {number(row['auc_high'])}]"
        assert line in text, line


def test_paired_intervals_detect_a_real_difference_and_not_a_null_one():
    rng = np.random.default_rng(0)
    y = np.repeat([0, 1], 100)
    signal = y + rng.normal(scale=1.0, size=200)
    def result(score):
        return PooledCVResult(y, score[None, :], np.zeros((1, 200), dtype=int) + np.arange(200) % 2,
                              0.5, 1, 0.0)
    results = {"good": result(signal), "noisy": result(signal + rng.normal(scale=3, size=200)),
               "same": result(signal + rng.normal(scale=1e-6, size=200))}
    table = auc_intervals(results, reference="good", n_bootstraps=500)
    assert table.loc["noisy", "diff_high"] < 0  # clearly worse: the interval excludes 0
    assert table.loc["same", "diff_low"] <= 0 <= table.loc["same", "diff_high"]
    assert table.loc["good", "auc_low"] < table.loc["good", "auc"] < table.loc["good", "auc_high"]


@pytest.mark.parametrize("arguments, message", [
    (["--n-jobs", "0"], "argument --n-jobs: expected a positive count, or -1"),
    (["--seed", "-1"], "argument --seed: expected an integer in [0, 4294967295]; got -1"),
    (["--seed", str(2**32)], "argument --seed: expected an integer in [0, 4294967295]"),
    (["--repeats", "0"], "argument --repeats: expected an integer >= 1"),
    (["--seed", "abc"], "argument --seed: invalid int value: 'abc'"),
    (["--plot", "/no/such/folder/pbc.png"], "--plot /no/such/folder/pbc.png: the folder"),
    (["--save-intervals", "/no/such/folder/x.csv"], "--save-intervals /no/such/folder/x.csv: the folder"),
    (["--plot", "/tmp/pbc.xyz"], "--plot /tmp/pbc.xyz: expected a file name ending in one of"),
    (["--plot", "/tmp"], "--plot /tmp: expected a file name, got a folder"),
    (["--save-intervals", "/tmp/"], "--save-intervals /tmp/: expected a file name, got a folder"),
    # the study ran and saved nothing, or the figure overwrote the intervals
    (["--save-intervals", ""], "--save-intervals was given an empty file name"),
    (["--plot", ""], "--plot was given an empty file name"),
    (["--plot", "/tmp/x.png", "--save-intervals", "/tmp/../tmp/x.png"], "name the same file"),
])
def test_the_main_job_refuses_bad_options_before_it_runs(arguments, message, capsys):
    # They raised tracebacks from joblib or numpy after 2 s; a bad output folder failed
    # after the whole 40 s study, its results lost.
    from sklearn_rnn.__main__ import main

    with pytest.raises(SystemExit) as stop:
        main(arguments)
    assert stop.value.code == 2
    assert message in capsys.readouterr().err


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="needs Linux's /proc, a folder that holds no new files")
@pytest.mark.parametrize("option", ["--plot", "--save-intervals"])
def test_the_main_job_refuses_a_folder_it_cannot_write_in_before_it_runs(option, capsys):
    # Only the folder's existence was checked: the study ran, then the write failed.
    from sklearn_rnn.__main__ import main

    with pytest.raises(SystemExit) as stop:
        main([option, "/proc/pbc.png" if option == "--plot" else "/proc/pbc.csv"])
    assert stop.value.code == 2
    assert f"{option} /proc/pbc." in (err := capsys.readouterr().err) and "no file can be written in /proc" in err


@pytest.mark.parametrize("option", ["--plot", "--save-intervals"])
def test_the_main_job_takes_an_existing_writable_file_in_a_folder_it_cannot_add_files_to(
    option, monkeypatch, tmp_path
):
    # The folder's probe file came first: an existing file the user may rewrite (in
    # place, as the study does) in a read-only shared folder was refused.
    import sklearn_rnn.__main__ as entry

    def read_only_folder(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    class Ran(Exception):
        pass

    def run(self, *args, **kwargs):
        raise Ran

    monkeypatch.setattr(entry.tempfile, "TemporaryFile", read_only_folder)
    monkeypatch.setattr(entry.PBCStudy, "run", run)
    existing = tmp_path / ("pbc.png" if option == "--plot" else "pbc.csv")
    existing.write_text("old")
    with pytest.raises(Ran):  # past the checks, into the study
        entry.main([option, str(existing)])
    with pytest.raises(SystemExit):  # a new file there is still refused
        entry.main([option, str(tmp_path / ("new.png" if option == "--plot" else "new.csv"))])


def test_the_main_job_refuses_a_plot_format_matplotlib_cannot_write_here(monkeypatch, tmp_path, capsys):
    # 'pgf' is listed as supported but needs a LaTeX install: the study ran, then savefig failed.
    from matplotlib.figure import Figure

    from sklearn_rnn.__main__ import main

    def savefig(self, fname, *args, format=None, **kwargs):
        raise RuntimeError("'xelatex' not found")

    monkeypatch.setattr(Figure, "savefig", savefig)
    with pytest.raises(SystemExit) as stop:
        main(["--plot", str(tmp_path / "pbc.pgf")])
    assert stop.value.code == 2
    assert "matplotlib cannot write 'pgf' files here ('xelatex' not found)" in capsys.readouterr().err


def test_the_main_job_refuses_plot_without_matplotlib_before_it_runs(monkeypatch, capsys):
    # matplotlib is not a core dependency: --plot gave an ImportError traceback.
    import sys

    from sklearn_rnn.__main__ import main

    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)  # import fails
    with pytest.raises(SystemExit) as stop:
        main(["--plot", "/tmp/pbc.png"])
    assert stop.value.code == 2
    assert "--plot /tmp/pbc.png: drawing the figure needs matplotlib" in capsys.readouterr().err


def test_the_main_jobs_plot_leaves_the_callers_backend_and_figures_alone(tmp_path):
    # main(["--plot", ...]) called from Python switched the caller's backend to Agg and
    # left its figure open in pyplot.
    import matplotlib
    import matplotlib.pyplot as plt

    from sklearn_rnn.__main__ import _save_plot

    class Result:
        def plot(self, axes):
            for ax in axes:
                ax.plot([0, 1], [0, 1])
            return axes

    backend = matplotlib.get_backend()
    try:
        matplotlib.use("svg")
        figures = plt.get_fignums()
        _save_plot(Result(), str(tmp_path / "curves.png"))
        assert matplotlib.get_backend() == "svg" and plt.get_fignums() == figures
        assert (tmp_path / "curves.png").read_bytes().startswith(b"\x89PNG")
    finally:
        matplotlib.use(backend)
