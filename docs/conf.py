"""Sphinx configuration of the sklearn-rnn documentation.

Build with ``bash docs/build.sh`` (quick gallery, warnings as errors) or
``SKLEARN_RNN_QUICK=0 sphinx-build -b html docs docs/_build/html`` for full-size examples.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import os
import re
import sys
import warnings
from pathlib import Path

import sklearn_rnn

sys.path.insert(0, str(Path(__file__).parent / "_sphinxext"))
# The experiments package (not installed with sklearn_rnn), whose plots the user guide
# draws; appended, so that the installed sklearn_rnn comes first.
sys.path.append(str(Path(__file__).resolve().parent.parent))

# -- Project ---------------------------------------------------------------------------
project = "sklearn-rnn"
author = "the sklearn-rnn developers"
copyright = "the sklearn-rnn developers, BSD-3-Clause"
release = sklearn_rnn.__version__
version = ".".join(release.split(".")[:2])

# -- Extensions ------------------------------------------------------------------------
extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.intersphinx",
    "sphinx.ext.mathjax",
    "numpydoc",
    "sphinx_gallery.gen_gallery",
    "matplotlib.sphinxext.plot_directive",
]

exclude_patterns = ["_build", "api/generated/backreferences", "Thumbs.db", ".DS_Store"]
templates_path = ["_templates"]
default_role = "literal"  # `x` renders as code, like ``x``
nitpicky = False

# -- API reference: autosummary stubs, numpydoc sections --------------------------------
autosummary_generate = True
autosummary_imported_members = True
autodoc_typehints = "none"  # the numpydoc Parameters section says it better
numpydoc_show_class_members = False  # autosummary lists members; avoids stub warnings
numpydoc_class_members_toctree = False
numpydoc_xref_param_type = False

# -- Gallery: every examples/**/plot_*.py is executed; others are shown, not run --------
# SKLEARN_RNN_QUICK=1 (set by docs/build.sh) makes each example shrink its data and
# epochs so that the whole gallery builds in a few minutes on two CPU cores.
sphinx_gallery_conf = {
    "examples_dirs": "../examples",
    "gallery_dirs": "auto_examples",
    "filename_pattern": r"/plot_",
    "ignore_pattern": r"(__init__|conftest)\.py",
    "within_subsection_order": "gallery_order.FirstStepsThenByName",
    "doc_module": ("sklearn_rnn",),
    "backreferences_dir": "api/generated/backreferences",
    "reference_url": {"sklearn_rnn": None},
    "download_all_examples": False,
    "remove_config_comments": True,
    "matplotlib_animations": False,
    "image_scrapers": ("matplotlib",),
    "min_reported_time": 1,
    "write_computation_times": False,  # the build log prints the times
    "abort_on_example_error": False,
}

# Figures drawn by ``.. plot::`` in the user guide (run at build time, like the gallery).
plot_include_source = True
plot_html_show_source_link = False
plot_html_show_formats = False
plot_formats = [("png", 90)]
plot_rcparams = {"figure.figsize": (6.4, 3.6), "savefig.bbox": "tight"}
plot_pre_code = "import numpy as np\nimport matplotlib.pyplot as plt\n"

# -- Cross references ------------------------------------------------------------------
intersphinx_mapping = {
    "python": ("https://docs.python.org/3", None),
    "numpy": ("https://numpy.org/doc/stable/", None),
    "sklearn": ("https://scikit-learn.org/stable/", None),
    "torch": ("https://docs.pytorch.org/docs/stable/", None),
    "skorch": ("https://skorch.readthedocs.io/en/stable/", None),
    "matplotlib": ("https://matplotlib.org/stable/", None),
    "pandas": ("https://pandas.pydata.org/docs/", None),
}
# The inventories are downloaded, and CI has no network (a failed download is a warning,
# which -W makes an error): links to other projects' docs are made only on request,
# with SKLEARN_RNN_DOCS_INTERSPHINX=1. Without them such references render as code.
if os.environ.get("SKLEARN_RNN_DOCS_INTERSPHINX", "0") != "1":
    intersphinx_mapping = {}

# Equations are typeset by MathJax in the reader's browser (Sphinx's default CDN copy).
# To read the pages offline, point this at a local MathJax 3 ``tex-mml-chtml.js``.
if os.environ.get("SKLEARN_RNN_MATHJAX_PATH"):
    mathjax_path = os.environ["SKLEARN_RNN_MATHJAX_PATH"]

# -- HTML ------------------------------------------------------------------------------
html_title = f"sklearn-rnn {release}"
html_static_path = ["_static"]
html_css_files = ["custom.css"]
if importlib.util.find_spec("pydata_sphinx_theme") is not None:
    html_theme = "pydata_sphinx_theme"
    html_theme_options = {
        "navigation_with_keys": False,
        "show_toc_level": 2,
        "secondary_sidebar_items": ["page-toc"],
        "footer_start": ["copyright"],
        "footer_end": [],
    }
else:  # Sphinx's built-in theme: the docs build without an extra dependency
    html_theme = "alabaster"
    html_theme_options = {"fixed_sidebar": True}

# Examples must not open windows, and expected warnings must not clutter the pages.
os.environ.setdefault("MPLBACKEND", "Agg")
warnings.filterwarnings("ignore", category=UserWarning, message="Matplotlib is currently using agg")


# -- Docstring hooks -------------------------------------------------------------------
_SHAPE = re.compile(r"of shape \(([^)]*)\)")
_BARE_ATTRIBUTE = re.compile(r"(?<![`\w])([A-Za-z]\w*_)(?=[,)\s]|$)")


def _quote_attributes_in_shapes(app, what, name, obj, options, lines):
    """Quote fitted-attribute names in ``of shape (n_features_in_,)``.

    In reStructuredText a word ending in ``_`` is a link to a target of that name, so
    an unquoted ``n_features_in_`` in a shape is an "unknown target" error. Docstrings
    should write ``(`n_features_in_`,)``; this keeps the build green where one does not.
    """
    for i, line in enumerate(lines):
        lines[i] = _SHAPE.sub(
            lambda m: "of shape (" + _BARE_ATTRIBUTE.sub(r"`\1`", m.group(1)) + ")", line
        )


_SPHINX_ROLE = re.compile(
    r":(?:ref|term|func|class|meth|attr|mod|obj):`~?([^`<]*?)\s*(?:<[^>]*>)?`"
)


def _unlink_foreign_docstrings(app, what, name, obj, options, lines):
    """Turn cross-references in docstrings inherited from scikit-learn into plain code.

    Methods such as ``score`` or ``get_params`` come from scikit-learn's base classes,
    whose docstrings point at labels of scikit-learn's own documentation.
    """
    # A property (say ``n_features_in_`` of scikit-learn's search classes) has no
    # module of its own; its getter has.
    module = getattr(obj, "__module__", "") or getattr(getattr(obj, "fget", None), "__module__", "") or ""
    if module.split(".")[0] in ("sklearn", "torch", "skorch"):
        for i, line in enumerate(lines):
            lines[i] = _SPHINX_ROLE.sub(lambda m: f"``{m.group(1).strip()}``", line)


def _skip_member(app, what, name, obj, skip, options):
    # scikit-learn generates set_{fit,score,...}_request for metadata routing; their
    # docstrings point into scikit-learn's own glossary. They are documented there.
    if name.startswith("set_") and name.endswith("_request"):
        return True
    return None


#: Index pages whose toctree (the last block of the file) gets every unlisted page of
#: their folder appended, so that a new page is part of the site without editing them.
_INDEX_FOLDERS = {"index": "", "user_guide/index": "user_guide"}


def _append_unlisted_pages(app, docname, source):
    if docname not in _INDEX_FOLDERS:
        return
    folder = Path(app.srcdir) / _INDEX_FOLDERS[docname]
    listed = set(re.findall(r"^ {3}(\S+)\s*$", source[0], flags=re.MULTILINE))
    unlisted = sorted(
        page.stem
        for page in folder.glob("*.rst")
        if page.stem not in listed and page.stem != "index" and not page.stem.startswith("_")
    )
    if unlisted:
        source[0] = source[0].rstrip("\n") + "\n" + "".join(f"   {name}\n" for name in unlisted)


_UNLISTED_MARKER = re.compile(r"^\.\. unlisted-public-names: ([\w.]+)[ \t]*$", re.MULTILINE)
_LISTED_NAME = re.compile(r"^ {3}(\w+)[ \t]*$", re.MULTILINE)


def public_names(module_name: str) -> list[str]:
    """The classes and functions in a module's ``__all__`` (constants left out)."""
    module = importlib.import_module(module_name)
    return [
        name
        for name in getattr(module, "__all__", [])
        if inspect.isclass(getattr(module, name)) or inspect.isfunction(getattr(module, name))
    ]


def _unlisted_public_names(api_text: str) -> dict[str, list[str]]:
    """For each ``.. unlisted-public-names: module`` marker, the names no section lists."""
    listed = set(_LISTED_NAME.findall(api_text))
    return {
        module: [name for name in public_names(module) if name not in listed]
        for module in _UNLISTED_MARKER.findall(api_text)
    }


def _list_unlisted_public_names(app, docname, source):
    """Expand ``.. unlisted-public-names: module`` in api.rst into an autosummary.

    Each module section of the API reference lists its names by hand, in an order that
    reads well; the marker at its end adds whatever the module's ``__all__`` holds that
    no section lists yet, so that a newly exported name is documented at once.
    """
    if docname != "api":
        return
    unlisted = _unlisted_public_names(source[0])

    def expand(match):
        names = unlisted.get(match.group(1))
        if not names:
            return ""
        rows = "".join(f"   {name}\n" for name in names)
        return (
            "Also public in this module:\n\n.. autosummary::\n   :toctree: api/generated/\n"
            f"   :nosignatures:\n\n{rows}"
        )

    source[0] = _UNLISTED_MARKER.sub(expand, source[0])


def _generate_unlisted_stubs(app):
    """Write the autosummary pages of the names the markers add (autosummary itself only
    sees the names written in the files)."""
    from sphinx.ext.autosummary.generate import generate_autosummary_docs

    api_text = (Path(app.srcdir) / "api.rst").read_text()
    names = [f"{m}.{n}" for m, found in _unlisted_public_names(api_text).items() for n in found]
    if not names:
        return
    listing = Path(app.doctreedir) / "unlisted_public_names.rst"
    listing.parent.mkdir(parents=True, exist_ok=True)
    listing.write_text(".. autosummary::\n   :toctree: .\n\n" + "".join(f"   {n}\n" for n in names))
    generate_autosummary_docs(
        [str(listing)], output_dir=str(Path(app.srcdir) / "api" / "generated"), app=app
    )


def setup(app):
    app.connect("source-read", _append_unlisted_pages)
    app.connect("source-read", _list_unlisted_public_names)
    app.connect("builder-inited", _generate_unlisted_stubs, priority=400)  # before autosummary
    app.connect("autodoc-process-docstring", _quote_attributes_in_shapes)
    app.connect("autodoc-process-docstring", _unlink_foreign_docstrings)
    app.connect("autodoc-skip-member", _skip_member)
