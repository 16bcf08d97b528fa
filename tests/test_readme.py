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


def test_the_main_job_refuses_an_output_file_it_could_not_write_before_it_runs(tmp_path, capsys, monkeypatch):
    # Only the folder was checked: a read-only file, a link into a missing folder or a
    # name too long for the file system passed, and the write failed after the study.
    import os

    locked = tmp_path / "locked.csv"
    locked.write_text("kept")
    locked.chmod(0o444)  # no write bit: refused even for an administrator, as save refuses it
    err = _refusal(capsys, save_intervals=str(locked))
    assert err is not None and f"--save-intervals {locked}: the file there is read-only (mode 444" in err
    assert "chmod u+w" in err and locked.read_text() == "kept"
    mine = tmp_path / "theirs.png"
    mine.write_text("kept")
    mine.chmod(0o644)
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda path, mode, **kw: str(path) != str(mine) and real_access(path, mode, **kw))
    err = _refusal(capsys, plot=str(mine))
    assert err is not None and f"--plot {mine}: this user may not write the file there (mode 644" in err
    monkeypatch.undo()
    (tmp_path / "dangling.csv").symlink_to(tmp_path / "missing" / "out.csv")
    err = _refusal(capsys, save_intervals=str(tmp_path / "dangling.csv"))
    missing = tmp_path / "missing" / "out.csv"
    assert err is not None and f"(a link to {missing}): the file cannot be created" in err
    long_name = tmp_path / ("x" * 300 + ".csv")
    err = _refusal(capsys, save_intervals=str(long_name))
    assert err is not None and "the file cannot be created (File name too long" in err
    # What can be written passes, and the check leaves nothing behind: an existing file
    # as it was, no new file, the target of a link to a missing file not created.
    (tmp_path / "old.csv").write_text("kept")
    (tmp_path / "to_new.png").symlink_to(tmp_path / "new_target.png")
    assert _refusal(capsys, plot=str(tmp_path / "to_new.png"), save_intervals=str(tmp_path / "old.csv")) is None
    assert _refusal(capsys, plot=str(tmp_path / "new.png"), save_intervals=str(tmp_path / "new.csv")) is None
    assert (tmp_path / "old.csv").read_text() == "kept"
    assert not any((tmp_path / name).exists() for name in ("new.png", "new.csv", "new_target.png"))


def test_the_readmes_nan_padding_pointer_pads_batch_first():
    # It showed pad_sequence(..., padding_value=float("nan")), whose default result is
    # time-major (T, n, d): prediction reads it as T sequences of n steps, silently.
    import torch

    from sklearn_rnn.sequences import check_sequences

    calls = re.findall(r"`(pad_sequence\([^`]*\))`", (ROOT / "README.md").read_text())
    assert calls
    seqs = [torch.ones(n, 2) for n in (3, 5, 4)]
    for call in calls:
        assert "batch_first=True" in call, call
        padded = eval(call, {"pad_sequence": torch.nn.utils.rnn.pad_sequence, "seqs": seqs})
        assert [len(x) for x in check_sequences(padded)] == [3, 5, 4]
