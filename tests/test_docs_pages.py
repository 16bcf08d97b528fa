"""The ``>>>`` snippets of the user guide run and print what the pages say."""

import doctest
import warnings
from pathlib import Path

import pytest
from sklearn.exceptions import ConvergenceWarning

GUIDE = Path(__file__).resolve().parents[1] / "docs" / "user_guide"
PAGES = sorted(GUIDE.glob("*.rst"))
FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


def test_the_guide_has_pages():
    assert {page.stem for page in PAGES} >= {"index", "input_formats", "method"}


@pytest.mark.parametrize("page", PAGES, ids=[page.stem for page in PAGES])
def test_guide_page_snippets(page):
    pytest.importorskip("imblearn")
    with warnings.catch_warnings():
        # Snippets train for a handful of epochs to stay fast.
        warnings.simplefilter("ignore", ConvergenceWarning)
        result = doctest.testfile(str(page), module_relative=False, optionflags=FLAGS, verbose=False)
    assert result.failed == 0, f"{result.failed} of {result.attempted} snippets of {page.name} failed"
