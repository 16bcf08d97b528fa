"""The experiments package (issue 5: the thesis' reproductions) in quick mode, and its helper."""

from __future__ import annotations

import importlib
import json
import re
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("matplotlib")
import matplotlib

matplotlib.use("Agg")

EXPERIMENTS = Path(__file__).resolve().parents[1] / "experiments"


def _load(name: str):
    """A module of the experiments package (the repository root is on ``sys.path``
    under ``python -m pytest`` and through the ``pythonpath`` setting of pyproject.toml)."""
    return importlib.import_module(f"experiments.{name}")


@pytest.fixture(autouse=True)
def _one_thread():
    import torch

    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


# ---------------------------------------------------------------- the streaming helper
def test_stream_screens_and_decides_success_on_the_whole_validation_set():
    stream = _load("_stream")
    spec = stream.RunSpec("temporal_order", 5, "sgd", 0, max_updates=200, check_every=50,
                          n_validation=400, n_screen=100)
    model, record = stream.train_on_stream(spec)
    assert record["solved"] and record["error"] < 0.01
    assert record["updates"] == record["curve"][-1][0] <= 200
    assert [c[0] for c in record["curve"]] == list(range(50, record["updates"] + 1, 50))
    # Screening checks score 100 sequences; success is only declared on all 400.
    assert record["curve"][-1][4] == 400
    assert all(c[4] in (100, 400) for c in record["curve"])
    assert model.n_features_in_ == 6


def test_stream_stops_at_the_cap_and_reports_a_failure():
    stream = _load("_stream")
    spec = stream.RunSpec("addition", 20, "simplex", 1, switch_threshold=0.5, max_updates=30,
                          check_every=20, n_validation=300, n_screen=None)
    _, record = stream.train_on_stream(spec)
    assert record["updates"] == 30 and not record["solved"]
    assert [c[0] for c in record["curve"]] == [20, 30]  # the cap is always checked
    assert record["error"] > 0.5  # 30 updates cannot solve addition at length 20
    # Which branch of algorithm 3.2 each update took is kept (psi 0.5 switches some).
    assert sum(record["branch_counts"].values()) == 30
    assert "%" in stream.runs_table([record])


def test_run_all_resumes_and_summarize_counts(tmp_path):
    stream = _load("_stream")
    specs = [stream.RunSpec("temporal_order", 5, "sgd", seed, max_updates=100, check_every=50,
                            n_validation=200, n_screen=None) for seed in (0, 1)]
    path = tmp_path / "runs.json"
    lines = []
    first = stream.run_all(specs, path, print_fn=lines.append)
    again = stream.run_all(specs, path, print_fn=lines.append)
    assert first == again and sum("skipped" in line for line in lines) == 2
    saved = json.loads(path.read_text())
    assert saved["machine"]["torch_threads"] >= 1 and len(saved["runs"]) == 2
    assert path.with_suffix(".csv").read_text().count("\n") == 3
    # Runs made in parallel (one folder each) merge into one file, without duplicates.
    other = tmp_path / "other" / "runs.json"
    stream.run_all(specs[1:], other, print_fn=lines.append)
    merged = stream.merge_results([other.parent], path)
    assert [r["seed"] for r in merged] == [0, 1] and len(stream.load_records(path)) == 2
    # A file that is not a results file (a log beside the folders) is refused by name,
    # and nothing is written.
    log = tmp_path / "other.log"
    log.write_text("  temporal_order T=5 sgd seed 1 update 50: error 0.7\n")
    before = path.read_text()
    with pytest.raises(ValueError, match=r"other\.log is not a results file.*output folder"):
        stream.merge_results([log], path)
    assert path.read_text() == before
    (row,) = stream.summarize(first, ["length"])
    assert row["runs"] == 2 and row["solved"] == sum(r["solved"] for r in first)


def test_a_run_added_to_a_results_file_keeps_the_earlier_runs_provenance(tmp_path, monkeypatch):
    # The file kept one machine and commit, replaced at every write: one run added to a
    # file of 56 renamed the commit of all of them.
    stream = _load("_stream")
    specs = [stream.RunSpec("temporal_order", 5, "sgd", seed, max_updates=50, check_every=50,
                            n_validation=100, n_screen=None) for seed in (0, 1)]
    path = tmp_path / "runs.json"
    monkeypatch.setenv("SKLEARN_RNN_COMMIT", "aaaaaaa")
    stream.run_all(specs[:1], path, print_fn=lambda line: None)
    old = json.loads(path.read_text())
    del old["runs"][0]["machine"]  # as files written before records kept their own
    path.write_text(json.dumps(old))
    monkeypatch.setenv("SKLEARN_RNN_COMMIT", "bbbbbbb")
    stream.run_all(specs, path, print_fn=lambda line: None)
    saved = json.loads(path.read_text())
    assert [run["machine"]["commit"] for run in saved["runs"]] == ["aaaaaaa", "bbbbbbb"]
    assert saved["machine"]["commit"] == "bbbbbbb"  # the file's: its last call's


def test_a_time_budget_records_the_run_it_cut_short_with_the_cap_it_reached(tmp_path):
    stream = _load("_stream")
    specs = [stream.RunSpec("addition", 20, "sgd", seed, max_updates=500, check_every=20,
                            n_validation=200, n_screen=None) for seed in (0, 1)]
    # A deadline already past: the run stops at its first check, recorded as a 20-update cap.
    _, record = stream.train_on_stream(specs[0], deadline=0.0)
    assert record["updates"] == record["max_updates"] == 20 and not record["solved"]
    assert record["planned_max_updates"] == 500 and len(record["curve"]) == 1
    assert "20 (time; 500 planned)" in stream.runs_table([record])
    # run_all starts no run once the deadline has passed, and records nothing for them.
    path = tmp_path / "runs.json"
    lines = []
    assert stream.run_all(specs, path, print_fn=lines.append, deadline=0.0) == []
    assert stream.load_records(path) == [] and all("not started" in line for line in lines)
    # Without a deadline the run goes to its cap and supersedes the cut one.
    (whole,) = stream.run_all(specs[:1], path, print_fn=lines.append)
    assert whole["max_updates"] == 500 and "planned_max_updates" not in whole
    assert whole["curve"][0] == pytest.approx(record["curve"][0][:3] + whole["curve"][0][3:])
    assert stream.final_runs([record, whole]) == [whole]


def test_a_rerun_with_a_larger_cap_supersedes_the_capped_run():
    stream = _load("_stream")
    base = {f: v for f, v in vars(stream.RunSpec("addition", 10, "sgd", 0)).items()}
    capped, longer, other = {**base, "max_updates": 100}, {**base, "max_updates": 500}, {
        **base, "seed": 1}
    kept = stream.final_runs([capped, other, longer])
    assert kept == [other, longer]


@pytest.mark.parametrize(
    "kwargs, match",
    [({"task": "nope"}, "task must be one of"), ({"max_updates": 0}, "max_updates"),
     ({"n_screen": 0}, "n_screen")],
)
def test_run_spec_rejects_bad_settings(kwargs, match):
    stream = _load("_stream")
    settings = {"task": "addition", "length": 10, "optimizer": "sgd", "seed": 0, **kwargs}
    with pytest.raises(ValueError, match=match):
        stream.RunSpec(**settings)


# ---------------------------------------------------------------- the three experiments
def test_figures_3_quick(tmp_path):
    script = _load("figures_3")
    results = script.main(["--quick", "--out", str(tmp_path)])
    snapshots = results["snapshots"]
    assert len(snapshots) == 2 * 2 * 2  # tasks x radii x stages
    ratio = {}
    for s in snapshots:
        norms = np.asarray(s["norms"])
        assert norms.shape == (len(s["steps"]),) and np.all(np.isfinite(norms))
        cosines = np.array([c for c in s["cosines"] if c is not None])
        assert np.all(np.abs(cosines) <= 1 + 1e-6)
        ratio[s["task"], s["spectral_radius"], s["stage"]] = norms[0] / norms[-1]
    for task in ("temporal_order", "addition"):
        # Below one the distant steps' gradients vanish at initialization; above, not.
        assert ratio[task, 0.8, "init"] < 1e-2 * ratio[task, 1.2, "init"]
        assert ratio[task, 1.2, "init"] > 0.1
    assert [r["updates"] for r in results["training"]] == [20] * 4
    for name in ("figure_3_1.png", "figure_3_2.png", "figure_3_3.png", "figures_3.json"):
        assert (tmp_path / name).stat().st_size > 1000
    (tmp_path / "figure_3_3.png").unlink()
    replotted = script.main(["--plot-only", "--out", str(tmp_path)])
    assert replotted == results and (tmp_path / "figure_3_3.png").exists()
    # results of other settings do not replace these (the shipped file was overwritten)
    saved = (tmp_path / "figures_3.json").read_text()
    with pytest.raises(SystemExit, match="holds results of other settings"):
        script.main(["--quick", "--out", str(tmp_path), "--updates", "2"])
    assert (tmp_path / "figures_3.json").read_text() == saved


def test_figure_4_1_quick(tmp_path):
    script = _load("figure_4_1")
    records = script.main(["--quick", "--out", str(tmp_path)])
    assert [(r["length"], r["spectral_radius"], r["seed"]) for r in records] == [
        (5, 1.2, 0), (5, 0.8, 0), (10, 1.2, 0), (10, 0.8, 0)]
    for r in records:
        assert r["optimizer"] == "sgd" and r["updates"] <= r["max_updates"] == 300
        assert r["solved"] == (r["error"] < 0.01)
    # Length 5 is easy for either initialization within the cap.
    assert all(r["solved"] for r in records if r["length"] == 5)
    rows = script.summarize(records, ["spectral_radius", "length"])
    assert {row["success_rate"] for row in rows} <= {0.0, 1.0}
    assert (tmp_path / "figure_4_1.png").stat().st_size > 1000
    assert (tmp_path / "figure_4_1.csv").read_text().count("\n") == 5
    with pytest.raises(SystemExit, match="no update cap"):
        script.main(["--lengths", "7", "--out", str(tmp_path / "other")])


def _with_runs_at_another_learning_rate(records, length):
    """``records`` and a copy of their capped runs at ``length`` made at learning rate
    0.01 with a larger cap, seed 0 solved: what the docs' next command appends."""
    return records + [
        {**r, "learning_rate": 0.01, "solved": r["seed"] == 0, "max_updates": 50_000}
        for r in records if r["length"] == length
    ]


def test_figure_4_1_keeps_learning_rates_apart(tmp_path, capsys):
    # figure_4_1 summarized and drew by (radius, length) only: three runs at lr 0.05 and
    # three at 0.01 became one point "1/6, cap 50k".
    script = _load("figure_4_1")
    stream = _load("_stream")
    base = [
        {**vars(stream.RunSpec("temporal_order", length, "sgd", seed, spectral_radius=rho,
                               max_updates=300)),
         "updates": 300, "solved": False, "error": 0.75, "best_error": 0.7, "seconds": 1.0,
         "seconds_per_update": 0.01, "curve": [[300, 0.75, 0.75, 1.4, 1000]]}
        for length in (5, 10) for rho in (1.2, 0.8) for seed in (0, 1, 2)
    ]
    records = _with_runs_at_another_learning_rate(base, 10)
    ax = script.plot(records)
    texts = [t.get_text() for t in ax.texts]
    assert "1/6, cap 50k" not in texts and "0/6, cap 50k" not in texts
    assert texts.count("1/3, cap 50k") == 2 and texts.count("0/3, cap 0.3k") == 4
    labels = ax.get_legend_handles_labels()[1]
    assert "sklearn_rnn, rho = 1.2, lr 0.01" in labels
    assert "sklearn_rnn, rho = 1.2, lr 0.05" in labels
    assert labels.count("thesis, rho > 1") == 1
    # The command line's summary keeps them apart too.
    (tmp_path / "figure_4_1.json").write_text(json.dumps({"mode": "full", "runs": records}))
    script.main(["--plot-only", "--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert "lr 0.05 rho 1.2 T=10: 0/3 solved" in out and "lr 0.01 rho 1.2 T=10: 1/3 solved" in out
    assert "/6 solved" not in out
    rows = {(r["learning_rate"], r["spectral_radius"], r["length"]): (r["solved"], r["runs"])
            for r in script.summary(records)}
    assert rows[0.05, 1.2, 10] == (0, 3) and rows[0.01, 1.2, 10] == (1, 3)


def test_table_4_1_quick(tmp_path):
    script = _load("table_4_1")
    records = script.main(["--quick", "--out", str(tmp_path)])
    methods = [(r["task"], script.method_of(r)) for r in records]
    assert methods == [(t, m) for t in ("addition", "temporal_order")
                       for m in ("sgd", "simplex", "simplex-switch")]
    switching = {r["task"]: r["switch_threshold"] for r in records
                 if script.method_of(r) == "simplex-switch"}
    assert switching == {"addition": 0.5, "temporal_order": 0.9}
    # Temporal order at length 8 is solved by every method within 200 updates.
    assert all(r["solved"] for r in records if r["task"] == "temporal_order")
    rows = script.table(records)
    assert len(rows) == 6
    # The thesis' means are for length 100: none stands beside these length-8 runs (the
    # table printed "thesis 1807466" beside an 8-step run) ...
    assert {row["thesis_mean_updates"] for row in rows} == {None}
    assert "1,807,466" not in (tmp_path / "table_4_1_summary.rst").read_text()
    # ... and each stands beside the same method's runs at length 100.
    rows = script.table([{**r, "length": 100} for r in records])
    assert {row["thesis_mean_updates"] for row in rows if row["task"] == "addition"} == {
        1_807_466, 2_338_500, 1_630_666}
    assert (tmp_path / "table_4_1.png").stat().st_size > 1000


def test_table_4_1_quick_with_another_cell(tmp_path):
    script = _load("table_4_1")
    records = script.main(["--quick", "--cell", "lstm", "--tasks", "temporal_order",
                           "--methods", "simplex-switch", "--out", str(tmp_path)])
    assert [(r["cell"], r["switch_threshold"]) for r in records] == [("lstm", 0.9)]
    (row,) = script.table(records)
    # The thesis' numbers are for its tanh network: none stands beside an LSTM.
    assert row["cell"] == "lstm" and row["thesis_mean_updates"] is None
    assert "lstm" in (tmp_path / "table_4_1_runs.rst").read_text()
    summary = (tmp_path / "table_4_1_summary.rst").read_text()
    assert f"{row['solved']} of 1" in summary and "lstm" in summary


def _legend_styles(ax):
    """Each legend label of ``ax`` with the (colour, line style) of its line (the dash
    pattern: ``get_linestyle`` reads every custom pattern as ``'--'``)."""
    return {line.get_label(): (line.get_color(),
                               getattr(line, "_unscaled_dash_pattern", line.get_linestyle()))
            for line in ax.get_lines() if not line.get_label().startswith("_")}


def test_table_4_1_plot_tells_learning_rates_apart():
    # The figure drew runs at lr 0.05 and 0.01 alike, under one legend entry.
    script = _load("table_4_1")
    stream = _load("_stream")
    records = [
        {**vars(stream.RunSpec("temporal_order", 100, "simplex", seed, learning_rate=lr,
                               switch_threshold=0.9, spectral_radius=1.2)),
         "updates": 400, "solved": False, "error": 0.75, "best_error": 0.7, "seconds": 1.0,
         "seconds_per_update": 0.01, "curve": [[200, 0.75, 0.75, 1.4, 1000],
                                                [400, 0.74, 0.74, 1.4, 1000]]}
        for lr in (0.05, 0.01) for seed in (0, 1, 2)
    ]
    (ax,) = script.plot(records).axes
    styles = _legend_styles(ax)
    assert set(styles) == {"simplex-switch, tanh, T = 100, lr 0.05",
                           "simplex-switch, tanh, T = 100, lr 0.01"}
    assert len(set(styles.values())) == 2
    # The committed results: every legend entry is drawn unlike every other.
    results = EXPERIMENTS / "results" / "table_4_1.json"
    if results.exists():
        for ax in script.plot(stream.load_records(results)).axes:
            styles = _legend_styles(ax)
            assert len(set(styles.values())) == len(styles), styles


def test_records_made_before_a_setting_existed_load_with_its_default(tmp_path):
    stream = _load("_stream")
    spec = stream.RunSpec("temporal_order", 5, "sgd", 0, max_updates=50, check_every=50,
                          n_validation=100, n_screen=None)
    path = tmp_path / "runs.json"
    stream.run_all([spec], path, print_fn=lambda line: None)
    data = json.loads(path.read_text())
    del data["runs"][0]["cell"]  # as in the results written before cells were a setting
    path.write_text(json.dumps(data))
    (record,) = stream.load_records(path)
    assert record["cell"] == "tanh"
    assert stream.run_all([spec], path, print_fn=lambda line: None) == [record]


def test_saved_full_results_are_consistent():
    """The committed full-mode results that the docs show: every run reported, caps kept."""
    results = EXPERIMENTS / "results"
    files = sorted(results.glob("*.json"))
    if not files:
        pytest.skip("no full-mode results committed")
    for path in files:
        data = json.loads(path.read_text())
        assert data["mode"] == "full", path
        for r in data.get("runs", []):
            assert 0 < r["updates"] <= r["max_updates"]
            assert r["solved"] == (r["curve"][-1][1] < r["target_error"]
                                   and r["curve"][-1][4] == r["n_validation"])
            assert r["n_validation"] == 10_000 and r["check_every"] == 200
    # The tables the docs include are the ones the scripts write from these results.
    stream = _load("_stream")
    for name in ("figure_4_1", "table_4_1"):
        if (results / f"{name}.json").exists():
            table = stream.runs_table(stream.load_records(results / f"{name}.json"))
            assert (results / f"{name}_runs.rst").read_text() == table
    if (results / "table_4_1.json").exists():
        script = _load("table_4_1")
        summary = script.summary_table(stream.load_records(results / "table_4_1.json"))
        assert (results / "table_4_1_summary.rst").read_text() == summary
    if (results / "figures_3.json").exists():
        figures = _load("figures_3")
        table = figures.summary_table(json.loads((results / "figures_3.json").read_text()))
        assert (results / "figures_3_runs.rst").read_text() == table


def test_bench_temporal_order_uses_the_shared_helper():
    bench = _load("bench_temporal_order")
    record = bench.run("sgd", 5, 0, 100, 50, learning_rate=0.05)
    assert record["solved"] and record["updates"] <= 100
    assert record["n_screen"] is None and record["switch_threshold"] is None


def test_experiments_and_benchmarks_edit_no_import_path_and_read_no_engine():
    """The experiments are a package (no ``sys.path`` edits, here or in benchmarks/) and
    read the estimators' public attributes, not the skorch engine's (``net_``)."""
    root = EXPERIMENTS.parent
    for path in [*EXPERIMENTS.glob("*.py"), *(root / "benchmarks").glob("*.py")]:
        assert "sys.path" not in path.read_text(), path
    for path in EXPERIMENTS.glob("*.py"):
        assert ".net_" not in path.read_text(), path


def test_branch_counts_helper_reads_the_estimator():
    stream = _load("_stream")
    spec = stream.RunSpec("temporal_order", 5, "simplex", 0, max_updates=20, check_every=10,
                          n_validation=100)
    model, record = stream.train_on_stream(spec)
    assert stream.branch_counts(model) == model.branch_counts_
    assert sum(model.branch_counts_.values()) == record["updates"]


@pytest.mark.parametrize("name, arguments", [
    ("table_4_1", ["--max-updates", "0"]), ("table_4_1", ["--length", "0"]),
    ("figures_3", ["--updates", "0"]), ("figure_4_1", ["--lengths", "5", "0"]),
])
def test_a_zero_count_is_refused_not_read_as_the_default(name, arguments, tmp_path, capsys):
    # `args.x or default` read 0 as "not given": --max-updates 0 ran the default 200.
    with pytest.raises(SystemExit) as stop:
        _load(name).main(["--quick", "--out", str(tmp_path), *arguments])
    assert stop.value.code == 2 and "expected an integer >= 1; got 0" in capsys.readouterr().err


@pytest.mark.parametrize("name, arguments, expected", [
    ("table_4_1", ["--seeds", "-1"], "expected an integer in [0, 4294967295]; got -1"),
    # A seed past 2**32 - 1 stopped the command after the seeds before it had trained (docs44).
    ("figure_4_1", ["--seeds", "0", "4294967296"], "expected an integer in [0, 4294967295]; got 4294967296"),
    ("table_4_1", ["--threads", "0"], "expected an integer >= 1; got 0"),
    ("figure_4_1", ["--learning-rate", "-0.1"], "expected a finite number > 0; got -0.1"),
    ("figures_3", ["--radii", "0"], "expected a finite number > 0; got 0.0"),
    ("bench_early_radius", ["--switch-threshold", "nan"], "expected a finite number; got nan"),
    ("bench_early_radius", ["--optimizers", "sgd", "simplx"], "invalid choice: 'simplx'"),
    ("bench_temporal_order", ["--check-every", "0"], "expected an integer >= 1; got 0"),
])
def test_bad_numbers_are_refused_before_the_run(name, arguments, expected, tmp_path, capsys, monkeypatch):
    # They ended in tracebacks from numpy or the estimators once the run had begun.
    with pytest.raises(SystemExit) as stop:
        if name.startswith("bench_"):  # they read sys.argv and take no --quick
            monkeypatch.setattr(sys, "argv", [name, *arguments])
            _load(name).main()
        else:
            _load(name).main(["--quick", "--out", str(tmp_path), *arguments])
    assert stop.value.code == 2 and expected in capsys.readouterr().err


@pytest.mark.parametrize("name", ["figure_4_1", "table_4_1", "figures_3"])
def test_an_out_that_cannot_take_the_results_is_refused_before_the_run(name, tmp_path, monkeypatch):
    # docs44: a file given as --out met FileExistsError at the first write, after the first
    # run trained (figures_3: after the whole measurement); an empty name wrote the results
    # into the current folder.
    taken = tmp_path / "results.txt"
    taken.write_text("a file")
    monkeypatch.chdir(tmp_path)
    for out, message in ((str(taken), f"--out {taken} is a file: --out takes a folder"),
                         (str(taken / "sub"), f"--out {taken / 'sub'}: {taken} in its path is a file"),
                         ("", "--out was given an empty name: it takes a folder")):
        with pytest.raises(SystemExit, match=re.escape(message)):
            _load(name).main(["--quick", "--out", out])
    assert sorted(path.name for path in tmp_path.iterdir()) == ["results.txt"]  # nothing written


def test_bench_temporal_order_refuses_a_folder_as_its_out_file(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "argv", ["bench_temporal_order", "--out", str(tmp_path)])
    with pytest.raises(SystemExit, match=re.escape(f"--out {tmp_path} is a folder: --out takes a file name")):
        _load("bench_temporal_order").main()


def test_figure_4_1_refuses_caps_below_one(tmp_path):
    with pytest.raises(SystemExit, match="--caps takes a length and a number of updates of at least 1"):
        _load("figure_4_1").main(["--quick", "--out", str(tmp_path), "--caps", "5:0"])


def test_figure_4_1_refuses_a_cap_for_a_length_it_does_not_run(tmp_path):
    # --caps 50:20 with --lengths 5 (a typo) ran length 5 at the default cap of 300.
    with pytest.raises(SystemExit, match=r"--caps names length\(s\) \[50\], which are not among the "
                       r"lengths run \(5\)"):
        _load("figure_4_1").main(["--quick", "--out", str(tmp_path), "--lengths", "5", "--caps", "50:20"])
    assert not any(tmp_path.iterdir())  # refused before the run


@pytest.mark.parametrize("budget", ["nan", "0", "-1"])
def test_a_time_budget_that_is_not_a_positive_number_is_refused(budget, tmp_path):
    # NaN passed (-1 and 0 were refused) and set a deadline that was never reached.
    with pytest.raises(SystemExit, match=f"--time-budget must be a positive number of minutes; got {budget}"):
        _load("figure_4_1").main(["--quick", "--out", str(tmp_path), "--time-budget", budget])


@pytest.mark.parametrize("name", ["figure_4_1", "table_4_1"])
def test_merge_from_a_folder_without_results_is_refused_before_the_run(name, tmp_path, capsys):
    # A mistyped --merge folder ended the script in a FileNotFoundError traceback naming
    # the folder, not the file looked for in it.
    out = tmp_path / "out"
    for source in (tmp_path / "typo_folder", tmp_path):  # missing, or there without the file
        with pytest.raises(SystemExit) as stop:
            _load(name).main(["--quick", "--out", str(out), "--merge", str(source)])
        assert stop.value.code == 2
        assert f"--merge {source}: no {name}.json there (expected the output folder of an earlier run" \
            in capsys.readouterr().err
        assert not out.exists()  # nothing written
    good = tmp_path / "good"
    good.mkdir()
    (good / f"{name}.json").write_text(json.dumps({"runs": []}))
    with pytest.raises(SystemExit, match="--plot-only: no results at"):  # past the check
        _load(name).main(["--quick", "--out", str(out), "--merge", str(good), "--plot-only"])
