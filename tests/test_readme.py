"""The README's commands and CI stay in step; its first example prints what it says."""

import re
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    block = text.split("```bash\n", 1)[1].split("```", 1)[0]
    return [line.split("#", 1)[0].strip() for line in block.strip().splitlines()]


def ten_lines() -> str:
    """The README's first Python example, under "Ten lines"."""
    text = (ROOT / "README.md").read_text()
    return text.split("## Ten lines", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]


def test_readme_opens_with_the_main_job_and_the_test_command():
    main_job, tests = readme_commands()
    assert main_job.endswith("python -m sklearn_rnn")
    assert tests.endswith("python -m pytest")


def test_ci_runs_the_readme_test_command():
    _, tests = readme_commands()
    assert tests in (ROOT / ".ci" / "run").read_text()


def test_the_ten_line_example_prints_the_number_its_comment_shows(capsys):
    # The README's first example is the defaults' first impression: its comment must be
    # what it prints (the defaults change, the comment has to follow).
    block = ten_lines()
    assert len(block.strip().splitlines()) <= 12
    shown = float(re.search(r"# (0\.\d{3}), about", block).group(1))
    exec(compile(block, "README.md", "exec"), {})
    printed = float(capsys.readouterr().out.strip().splitlines()[-1])
    assert abs(printed - shown) < 0.0015, (printed, shown)


def test_the_docs_landing_page_shows_the_readme_example():
    # One example for the first impression: the landing page shows the README's ten lines,
    # whose printed number the test above checks.
    page = (ROOT / "docs" / "index.rst").read_text()
    body = page.split(".. code-block:: python\n\n", 1)[1].splitlines(keepends=True)
    end = next(i for i, line in enumerate(body) if line.strip() and not line.startswith("   "))
    shown = textwrap.dedent("".join(body[:end])).rstrip("\n") + "\n"
    assert shown == ten_lines()


def _refusal(capsys, plot=None, save_intervals=None):
    """What the main job's early check of its output paths says (never the study: a
    path it accepts returns None here, where main would run the study for minutes)."""
    import argparse

    from sklearn_rnn.__main__ import _check_output_paths

    parser = argparse.ArgumentParser(prog="python -m sklearn_rnn")
    try:
        _check_output_paths(parser, argparse.Namespace(plot=plot, save_intervals=save_intervals))
    except SystemExit as stop:
        assert stop.code == 2
        return capsys.readouterr().err
    return None


def test_the_main_job_refuses_the_same_file_named_through_a_link(tmp_path, capsys):
    # Paths were compared by abspath, which follows no link: the study ran, the CSV was
    # written, and the figure then overwrote it.
    import os

    (tmp_path / "link").symlink_to(tmp_path, target_is_directory=True)
    err = _refusal(capsys, plot=str(tmp_path / "link" / "same.png"), save_intervals=str(tmp_path / "same.png"))
    assert err is not None and "and --save-intervals" in err and "name the same file" in err
    (tmp_path / "intervals.csv").write_text("")
    os.link(tmp_path / "intervals.csv", tmp_path / "figure.png")  # a hard link: one file, two names
    err = _refusal(capsys, plot=str(tmp_path / "figure.png"), save_intervals=str(tmp_path / "intervals.csv"))
    assert err is not None and "name the same file" in err
    assert _refusal(capsys, plot=str(tmp_path / "link" / "a.png"), save_intervals=str(tmp_path / "a.csv")) is None


def test_the_main_job_says_when_a_file_stands_where_the_folder_should_be(tmp_path, capsys):
    # It said the folder "does not exist", while it was there as a file.
    (tmp_path / "afile").write_text("")
    for option, path in (("--plot", tmp_path / "afile" / "pbc.png"),
                         ("--save-intervals", tmp_path / "afile" / "sub" / "pbc.csv")):
        err = _refusal(capsys, **{option.lstrip("-").replace("-", "_"): str(path)})
        assert f"{option} {path}: {tmp_path / 'afile'} is a file, not a folder" in err
        assert "does not exist" not in err
    assert "the folder" in _refusal(capsys, plot=str(tmp_path / "none" / "pbc.png"))  # really missing
