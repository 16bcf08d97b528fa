"""The repository's Python sources compile without warnings."""

from __future__ import annotations

import pathlib
import warnings

ROOT = pathlib.Path(__file__).resolve().parents[1]
FOLDERS = ("sklearn_rnn", "tests", "benchmarks", "examples", "experiments", "docs")


def test_every_source_compiles_without_a_warning():
    # An invalid escape sequence in a plain string ("\(" in a regular expression) is a
    # DeprecationWarning on Python 3.11, a SyntaxWarning from 3.12 and will be an error.
    sources = [ROOT / "conftest.py"] + [
        path for folder in FOLDERS for path in sorted((ROOT / folder).rglob("*.py")) if "_build" not in path.parts
    ]
    assert len(sources) > 50  # the folders were found
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for path in sources:
            compile(path.read_text(encoding="utf-8"), str(path), "exec")
