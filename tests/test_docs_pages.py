"""The ``>>>`` snippets of the user guide run and print what the pages say."""

import doctest
import re
import warnings
from pathlib import Path

import pytest
from sklearn.exceptions import ConvergenceWarning

GUIDE = Path(__file__).resolve().parents[1] / "docs" / "user_guide"
PAGES = sorted(GUIDE.glob("*.rst"))
FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
#: Packages of the optional extras (pyproject.toml) that a page's snippets may import.
OPTIONAL = frozenset({"skops", "music21", "matplotlib", "dask", "distributed"})


@pytest.fixture
def one_thread():
    """Small networks train fastest on one thread (several times faster on 2 busy cores)."""
    torch = pytest.importorskip("torch")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def test_the_guide_has_pages():
    assert {page.stem for page in PAGES} >= {"index", "input_formats", "method"}


@pytest.mark.parametrize("page", PAGES, ids=[page.stem for page in PAGES])
def test_guide_page_snippets(page, one_thread):
    pytest.importorskip("imblearn")
    # A page may show a package of an optional extra (skops on the saving page): without
    # it, skip. Only those: a failing import of anything else is a failure.
    shown = set(re.findall(r">>> (?:import|from) (\w+)", page.read_text()))
    for module in sorted(shown & OPTIONAL):
        pytest.importorskip(module)
    with warnings.catch_warnings():
        # Snippets train for a handful of epochs to stay fast.
        warnings.simplefilter("ignore", ConvergenceWarning)
        result = doctest.testfile(
            str(page), module_relative=False, optionflags=FLAGS, verbose=False
        )
    assert result.failed == 0, (
        f"{result.failed} of {result.attempted} snippets of {page.name} failed"
    )


EXAMPLES = sorted((GUIDE.parents[1] / "examples").rglob("plot_*.py"))


@pytest.mark.parametrize("script", EXAMPLES, ids=[s.name for s in EXAMPLES])
def test_gallery_examples_have_a_quick_mode_and_a_title(script):
    """The docs build runs every example with SKLEARN_RNN_QUICK=1 and must stay short."""
    text = script.read_text()
    assert "SKLEARN_RNN_QUICK" in text, (
        f"{script.name} should shrink its work when SKLEARN_RNN_QUICK=1"
    )
    assert text.lstrip().startswith(('"""', "'''", 'r"""')), (
        f"{script.name} needs a docstring: the gallery title"
    )


def test_training_history_example_trains_one_network_by_three_optimizers(monkeypatch, capsys):
    # examples/plot_training_history.py (and the README figure drawn from it) says three
    # optimizers learn the task from the same spectral initialization, but left cell,
    # readout and conv_kernels at 'auto', which resolve by optimizer: 'adam' and 'sgd'
    # trained a GRU with the pooled readout, 'simplex' the thesis' tanh network.
    pytest.importorskip("matplotlib")
    import runpy

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    monkeypatch.setenv("SKLEARN_RNN_QUICK", "1")
    script = GUIDE.parents[1] / "examples" / "plot_training_history.py"
    models = runpy.run_path(str(script), run_name="__main__")["models"]
    plt.close("all")
    assert [model.optimizer for model in models.values()] == ["adam", "sgd", "simplex"]
    networks = {
        name: (model._resolved_cell(), model._resolved_spectral_radius(), model._resolved_readout(),
               model.module_.conv is None, model._resolved_tol(),
               {key: tuple(value.shape) for key, value in model.module_.state_dict().items()})
        for name, model in models.items()
    }
    assert networks["adam"] == networks["sgd"] == networks["simplex"], networks
    assert networks["adam"][:4] == ("tanh", 1.2, "last", True)
